"""A failing job's streak as a range to replay: the job page's "replay the N failed
occurrences since the streak began" fills the backfill preview with it.

The streak is counted as the alerts count it (:mod:`jobhost.store.failing`: back from the
newest occurrence until one whose last attempt succeeded); the count offered is what a
backfill in mode ``failed`` over that range picks, so the preview lists the number the page
promised."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import FAILED, STREAK_LIMIT, StreakRange
from jobhost.store.backfills import last_outcomes
from jobhost.store.failing import SCAN_ROWS
from jobhost.store.schema import runs

__all__ = ["streak_range"]

_QUERY = (
    select(runs.c.occurrence, runs.c.outcome)
    .where(runs.c.occurrence.is_not(None), runs.c.outcome.in_((*FAILED, "succeeded")))
    .order_by(runs.c.occurrence.desc(), runs.c.attempt.desc())
    .limit(SCAN_ROWS)
)


def streak_range(connection: Connection, name: str) -> StreakRange | None:
    """The current failure streak of job ``name`` as a range, or None when it is not failing."""
    rows = connection.execute(_QUERY.where(runs.c.job_name == name))
    first: datetime | None = None
    last: datetime | None = None
    counted = 0
    for occurrence, outcome in rows:
        if occurrence == first:
            # An older attempt of an occurrence already judged by its last one.
            continue
        if outcome == "succeeded" or counted == STREAK_LIMIT:
            break
        first, counted = occurrence, counted + 1
        last = last or occurrence
    if first is None or last is None:
        return None
    outcomes = last_outcomes(connection, name, first, last + timedelta(microseconds=1))
    failed = sum(1 for outcome in outcomes.values() if outcome in FAILED)
    return StreakRange(first, last, failed) if failed else None
