"""Runs found by the start of their id, so an operator can type ``4fe92f73`` for a 32-character
run id: one range read on the runs' primary key, never a scan."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import RunIdMatch
from jobhost.store.schema import runs

__all__ = ["runs_by_prefix"]

_HEX = "0123456789abcdef"


def runs_by_prefix(connection: Connection, prefix: str, *, limit: int) -> Sequence[RunIdMatch]:
    """Up to ``limit`` runs whose id starts with ``prefix`` (lower-case hex), by id.

    ``id >= prefix AND id < successor`` rather than ``LIKE 'prefix%'``: PostgreSQL's index on a
    column of a collation other than C serves a range, not a ``LIKE``. Between digits and
    lower-case letters every collation agrees with the bytes' order.
    """
    query = select(runs.c.id, runs.c.job_name, runs.c.outcome, runs.c.queued_at).where(
        runs.c.id >= prefix
    )
    upper = _successor(prefix)
    if upper is not None:
        query = query.where(runs.c.id < upper)
    rows = connection.execute(query.order_by(runs.c.id).limit(limit))
    return [RunIdMatch(str(i), str(job), str(outcome), queued) for i, job, outcome, queued in rows]


def _successor(prefix: str) -> str | None:
    """The least hex text above every text that starts with ``prefix``; None for ``ff...f``."""
    kept = prefix.rstrip("f")
    if not kept:
        return None
    return kept[:-1] + _HEX[_HEX.index(kept[-1]) + 1]
