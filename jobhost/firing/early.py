"""How long before an occurrence a host claims it.

A claim on PostgreSQL is a transaction of several statements, and a run starts only once that
transaction has committed. Woken at the instant, a host would start every run a claim's length
late. So an idle host wakes that long before the next occurrence, claims it (its row
``running``, its ``started_at`` the occurrence) and its worker starts it at the instant.

The lead follows the claims this host made recently: twice the slowest of them, so that a claim
slower than usual is still done in time, within :data:`FLOOR` and :data:`CAP`. Not thread-safe:
only the loop uses it.
"""

from __future__ import annotations

from collections import deque
from datetime import timedelta

__all__ = ["CAP", "FLOOR", "ClaimLead"]

FLOOR = 0.005
"""Seconds: the least lead, whatever the claims took."""

CAP = 0.05
"""Seconds: the most lead. A claim slower than this is late by what it takes beyond it."""

_KEPT = 16
_MARGIN = 2.0


class ClaimLead:
    """The recent claims' durations, and the lead they call for."""

    def __init__(self) -> None:
        self._took: deque[float] = deque(maxlen=_KEPT)

    def took(self, seconds: float) -> None:
        """A claim took ``seconds`` from the turn's start to its commit."""
        self._took.append(seconds)

    @property
    def lead(self) -> timedelta:
        slowest = max(self._took, default=0.0)
        return timedelta(seconds=min(max(_MARGIN * slowest, FLOOR), CAP))
