"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job or the whole installation.

Given the reader's ``now``, each slice is answered in three parts: its whole minutes that are
closed (no run can still finish in them) from the counts :mod:`jobhost.store.outcome_minutes`
keeps, and its partial first and last minutes plus any minutes not closed yet from the runs'
indexes (``ix_runs_outcome_finished_at`` for the installation,
``ix_runs_job_name_outcome_finished_at`` for a job). A day's chart of a busy installation then
reads some 1,440 minutes' counts and a few thousand runs, not every run of the day. Without
``now`` every slice is counted from the runs. Firing writes nothing for the chart either way.

The statements' text depends only on how many slices there are, so each is prepared once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import cache
from itertools import pairwise
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    bindparam,
    func,
    literal,
    select,
    text,
    union_all,
)
from sqlalchemy.engine import Connection

from jobhost.store.engine import is_read_only
from jobhost.store.outcome_minutes import ceil_minute, closed_until, floor_minute, minute_counts
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

_Range = tuple[datetime, datetime]


def outcome_counts(
    connection: Connection,
    start: datetime,
    end: datetime,
    slices: int,
    job: str | None = None,
    *,
    now: datetime | None = None,
) -> list[dict[str, int]]:
    """For each of ``slices`` equal slices of [start, end), oldest first, the runs that
    finished in it by outcome (outcomes with none left out); of ``job`` when given. With
    ``now`` (the store's clock), closed minutes are answered from their kept counts."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    closed = closed_until(connection, now, job) if now is not None else None
    kept: list[_Range | None] = []
    live: list[_Range] = []
    for first, last in pairwise(edges):
        whole = _closed_minutes(first, last, closed)
        kept.append(whole)
        if whole is None:
            live += [(first, last), (first, first)]
        else:
            live += [(first, whole[0]), (whole[1], last)]
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    if closed is not None:
        keep = not is_read_only(connection.engine)
        counts = minute_counts(connection, kept, job, keep=keep)
    for outcome, part, count in _live(connection, live, job):
        if count:
            one = counts[int(part) // 2]
            one[str(outcome)] = one.get(str(outcome), 0) + int(count)
    return counts


def counts_before(
    connection: Connection, now: datetime, span: timedelta, slices: int
) -> list[dict[str, int]]:
    """:func:`outcome_counts` over the ``span`` before ``now``."""
    return outcome_counts(connection, now - span, now, slices, now=now)


def _closed_minutes(first: datetime, last: datetime, closed: datetime | None) -> _Range | None:
    """The whole closed minutes of [first, last), or None when it holds none."""
    if closed is None:
        return None
    low, high = ceil_minute(first), min(floor_minute(last), closed)
    return (low, high) if low < high else None


def _live(
    connection: Connection, parts: list[_Range], job: str | None
) -> list[tuple[str, int, int]]:
    """Each part's runs by outcome, counted from the runs' index in one statement."""
    if connection.dialect.name == "postgresql":
        # One text for any number of parts, planned once: a nested loop of index range scans.
        values: dict[str, object] = {
            "lo": [lo for lo, _ in parts],
            "hi": [hi for _, hi in parts],
            "outcomes": list(FINISHED_OUTCOMES),
            "job": job,
        }
        return _triples(connection.execute(_PARTS_JOB if job is not None else _PARTS, values))
    statement = _grouped_statement(len(parts), job is not None)
    return _triples(connection.execute(statement, _bounds(parts, job)))


_PARTS_SQL = """
SELECT r.outcome, p.part - 1, count(*)
FROM unnest(CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) WITH ORDINALITY
    AS p(lo, hi, part)
JOIN runs AS r ON r.finished_at >= p.lo AND r.finished_at < p.hi
WHERE r.outcome = ANY(CAST(:outcomes AS text[])) {job}
GROUP BY r.outcome, p.part
"""
_PARTS = text(_PARTS_SQL.format(job=""))
_PARTS_JOB = text(_PARTS_SQL.format(job="AND r.job_name = :job"))


@cache
def _grouped_statement(parts: int, of_job: bool) -> CompoundSelect[Any]:
    """Each part's index range grouped by outcome: the index is in outcome order, so neither
    store sorts, and an empty part costs a probe per outcome."""
    return union_all(
        *[
            select(runs.c.outcome, literal(index).label("part"), func.count())
            .where(runs.c.outcome.in_(FINISHED_OUTCOMES), *_window(index, of_job))
            .group_by(runs.c.outcome)
            for index in range(parts)
        ]
    )


def _window(index: int, of_job: bool) -> list[ColumnElement[bool]]:
    """Finished in part ``index``; of the job when ``of_job``."""
    finished = runs.c.finished_at
    conditions = [
        finished >= bindparam(f"lo_{index}", type_=finished.type),
        finished < bindparam(f"hi_{index}", type_=finished.type),
    ]
    if of_job:
        conditions.append(runs.c.job_name == bindparam("job"))
    return conditions


def _bounds(parts: Sequence[_Range], job: str | None) -> dict[str, object]:
    values: dict[str, object] = {}
    for index, (lo, hi) in enumerate(parts):
        values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
    if job is not None:
        values["job"] = job
    return values


def _triples(rows: Iterable[Sequence[Any]]) -> list[tuple[str, int, int]]:
    return [(str(outcome), int(index), int(count)) for outcome, index, count in rows]
