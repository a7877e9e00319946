"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job or the whole installation.

One statement per chart, answered from an index — ``ix_runs_outcome_finished_at`` for the
installation, ``ix_runs_job_name_outcome_finished_at`` for a job — never from the rows, and
nothing kept by the recorder (firing writes no extra row for the chart). Each store gets the
form it counts fastest (``benchmarks/outcome_chart.py`` prints both beside the single CASE
statement this replaced, at a million runs a day):

- PostgreSQL groups by ``width_bucket`` over the slices' bounds (a binary search per index
  entry, one hash of a few hundred groups);
- SQLite counts each (outcome, slice) as its own index range, all in one statement: a count
  of an index range only steps through entries, where grouping an expression per row sorts a
  million rows in a temporary b-tree.

The statements' text depends only on how many slices there are, so each is prepared once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Select,
    bindparam,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import array
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
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    if connection.dialect.name == "postgresql":
        found = _bucketed(connection, edges, job)
    else:
        found = _ranged(connection, edges, job)
    for outcome, index, count in found:
        if count:
            counts[int(index)][str(outcome)] = int(count)
    return counts


def counts_before(
    connection: Connection, now: datetime, span: timedelta, slices: int
) -> list[dict[str, int]]:
    """:func:`outcome_counts` over the ``span`` before ``now``."""
    return outcome_counts(connection, now - span, now, slices)


def _bucketed(
    connection: Connection, edges: list[datetime], job: str | None
) -> list[tuple[str, int, int]]:
    """PostgreSQL: one grouped scan of the window's index range, each entry placed by a binary
    search over the inner bounds (``width_bucket`` answers 0 below the first)."""
    statement = _bucketed_statement(len(edges) - 1, job is not None)
    return _triples(connection.execute(statement, _bounds(edges, job)))


def _ranged(
    connection: Connection, edges: list[datetime], job: str | None
) -> list[tuple[str, int, int]]:
    """SQLite: a count of each (outcome, slice) index range, all in one statement (7 outcomes
    by at most 30 slices stays under SQLite's 500 parts of a compound statement)."""
    statement = _ranged_statement(len(edges) - 1, job is not None)
    return _triples(connection.execute(statement, _bounds(edges, job)))


@cache
def _bucketed_statement(slices: int, of_job: bool) -> Select[tuple[str, int, int]]:
    inner = [_edge(index) for index in range(1, slices)]
    slice_of = (func.width_bucket(runs.c.finished_at, array(inner)) if inner else literal(0)).label(
        "slice"
    )
    placed = (
        select(runs.c.outcome, slice_of)
        .where(*_window(0, slices, of_job), runs.c.outcome.in_(FINISHED_OUTCOMES))
        .subquery()
    )
    # Grouped outside: PostgreSQL would not match an expression with bound values in GROUP BY.
    return select(placed.c.outcome, placed.c.slice, func.count()).group_by(
        placed.c.outcome, placed.c.slice
    )


@cache
def _ranged_statement(slices: int, of_job: bool) -> CompoundSelect[tuple[str, int, int]]:
    """Built once for each number of slices: a statement of a couple of hundred parts costs
    more to build than a small window costs to count."""
    parts = [
        select(
            literal(outcome).label("outcome"),
            literal(index).label("slice"),
            select(func.count())
            .select_from(runs)
            .where(runs.c.outcome == outcome, *_window(index, index + 1, of_job))
            .scalar_subquery()
            .label("runs"),
        )
        for outcome in FINISHED_OUTCOMES
        for index in range(slices)
    ]
    return union_all(*parts)


def _window(first: int, last: int, of_job: bool) -> list[ColumnElement[bool]]:
    """Finished from edge ``first`` up to edge ``last``; of the job when ``of_job``."""
    conditions = [runs.c.finished_at >= _edge(first), runs.c.finished_at < _edge(last)]
    if of_job:
        conditions.append(runs.c.job_name == bindparam("job"))
    return conditions


def _edge(index: int) -> BindParameter[datetime]:
    return bindparam(f"edge_{index}", type_=runs.c.finished_at.type)


def _bounds(edges: list[datetime], job: str | None) -> dict[str, object]:
    values: dict[str, object] = {f"edge_{index}": edge for index, edge in enumerate(edges)}
    if job is not None:
        values["job"] = job
    return values


def _triples(rows: Iterable[Sequence[Any]]) -> list[tuple[str, int, int]]:
    return [(str(outcome), int(index), int(count)) for outcome, index, count in rows]
