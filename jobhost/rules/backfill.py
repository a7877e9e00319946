"""Which occurrences of a past range a backfill replays, by mode, from what the ledger says.

``missing`` replays every occurrence without a successful run: never run, recorded missed or
skipped, or whose last attempt failed, timed out, was abandoned or cancelled. ``failed`` replays
only those whose last attempt failed, timed out or was abandoned. ``all`` replays every one. An
occurrence whose run is still pending or running is being handled: only ``all`` takes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Final

__all__ = ["FAILED_OUTCOMES", "MODES", "select_occurrences"]

MODES: Final = ("missing", "failed", "all")
FAILED_OUTCOMES: Final = frozenset({"failed", "timed_out", "abandoned"})
_MISSING_OUTCOMES: Final = FAILED_OUTCOMES | {"missed", "skipped", "cancelled"}


def select_occurrences(
    mode: str, occurrences: Iterable[datetime], last_outcomes: Mapping[datetime, str]
) -> list[datetime]:
    """The ``occurrences`` a backfill in ``mode`` replays, in their order.

    ``last_outcomes`` maps an occurrence to its last attempt's outcome; an occurrence absent
    from it never ran. Raises ValueError for a mode not in :data:`MODES`.
    """
    if mode == "all":
        return list(occurrences)
    if mode == "missing":
        return [o for o in occurrences if last_outcomes.get(o, "missed") in _MISSING_OUTCOMES]
    if mode == "failed":
        return [o for o in occurrences if last_outcomes.get(o) in FAILED_OUTCOMES]
    raise ValueError(f"unknown backfill mode {mode!r}: use one of {', '.join(MODES)}")
