"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job or the whole installation.

One statement per chart, counted by the database from an index — ``ix_runs_outcome_finished_at``
for the installation, ``ix_runs_job_name_outcome_finished_at`` for a job — never by reading the
rows: the slice of each row is a CASE over the slices' bounds, so the statement's text depends
only on how many slices there are.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from jobhost.store.schema import runs

__all__ = ["FINISHED_OUTCOMES", "counts_before", "outcome_counts"]

FINISHED_OUTCOMES = (
    "succeeded",
    "failed",
    "timed_out",
    "abandoned",
    "cancelled",
    "skipped",
    "missed",
)
"""Every outcome a ledger row ends with (``skipped`` and ``missed`` are recorded finished)."""


def outcome_counts(
    connection: Connection, start: datetime, end: datetime, slices: int, job: str | None = None
) -> list[dict[str, int]]:
    """For each of ``slices`` equal slices of [start, end), oldest first, the runs that
    finished in it by outcome (outcomes with none left out); of ``job`` when given."""
    width = (end - start) / slices
    bounds = [start + width * (index + 1) for index in range(slices - 1)]
    slice_of = case(
        *[(runs.c.finished_at < bound, index) for index, bound in enumerate(bounds)],
        else_=slices - 1,
    ).label("slice")
    rows = select(runs.c.outcome, slice_of).where(
        runs.c.outcome.in_(FINISHED_OUTCOMES),
        runs.c.finished_at >= start,
        runs.c.finished_at < end,
    )
    if job is not None:
        rows = rows.where(runs.c.job_name == job)
    placed = rows.subquery()
    # Grouped outside: PostgreSQL would not match a CASE with bound values in GROUP BY.
    query = select(placed.c.outcome, placed.c.slice, func.count()).group_by(
        placed.c.outcome, placed.c.slice
    )
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    for outcome, index, count in connection.execute(query):
        counts[int(index)][str(outcome)] = int(count)
    return counts


def counts_before(
    connection: Connection, now: datetime, span: timedelta, slices: int
) -> list[dict[str, int]]:
    """:func:`outcome_counts` over the ``span`` before ``now``."""
    return outcome_counts(connection, now - span, now, slices)
