"""What the ledger says about a past range of one job's occurrences, for a backfill to choose from.

One statement over the run table's unique index (job, occurrence, attempt): the range's rows in
order, of which the last attempt of each occurrence speaks for it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.store.schema import runs

__all__ = ["last_outcomes"]


def last_outcomes(
    connection: Connection, job: str, start: datetime, end: datetime
) -> dict[datetime, str]:
    """Each occurrence of ``job`` in ``[start, end)`` that has a ledger row: its last attempt's
    outcome (``missed``/``skipped`` rows are attempt 0, so any real attempt outranks them)."""
    rows = connection.execute(
        select(runs.c.occurrence, runs.c.outcome)
        .where(
            runs.c.job_name == job,
            runs.c.occurrence >= start,
            runs.c.occurrence < end,
        )
        .order_by(runs.c.occurrence, runs.c.attempt)
    )
    found: dict[datetime, str] = {}
    for occurrence, outcome in rows:
        found[occurrence] = outcome
    return found
