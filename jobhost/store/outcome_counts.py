"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job or the whole installation.

One job's chart is one statement over the job's index range
(``ix_runs_job_name_outcome_finished_at``), each index entry placed in its slice by the
database: it costs what the job's runs in the range cost, whatever the ledger holds, and reads
nothing kept (a job's runs in a minute are at most that minute's count, so kept counts save a
job nothing, where keeping them cost every chart a round trip or a write).

The installation's chart, given the reader's ``now``, answers each slice in three parts: its
whole minutes that are closed (no run can still finish in them) from the counts
:mod:`jobhost.store.outcome_minutes` keeps, and its partial first and last minutes plus any
minutes not closed yet from the runs' index ``ix_runs_outcome_finished_at``. A day's chart of
a busy installation then reads some 1,440 minutes' counts and a few thousand runs, not every
run of the day. Without ``now`` every slice is counted from the runs. Firing writes nothing
for the chart either way.

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
from jobhost.store.job_outcome_counts import job_counts
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
    finished in it by outcome (outcomes with none left out); of ``job`` when given, in one
    statement. For every job with ``now`` (the store's clock), closed minutes are answered
    from their kept counts."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    if job is not None:
        return job_counts(connection, edges, job)
    closed = closed_until(connection, now) if now is not None else None
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
        counts = minute_counts(connection, kept, keep=keep)
    for outcome, part, count in _live(connection, live):
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


def _live(connection: Connection, parts: list[_Range]) -> list[tuple[str, int, int]]:
    """Each part's runs by outcome, counted from the runs' index in one statement."""
    if connection.dialect.name == "postgresql":
        # One text for any number of parts, planned once: a nested loop of index range scans.
        values: dict[str, object] = {
            "lo": [lo for lo, _ in parts],
            "hi": [hi for _, hi in parts],
            "outcomes": list(FINISHED_OUTCOMES),
        }
        return _triples(connection.execute(_PARTS, values))
    statement = _grouped_statement(len(parts))
    return _triples(connection.execute(statement, _bounds(parts)))


_PARTS_SQL = """
SELECT r.outcome, p.part - 1, count(*)
FROM unnest(CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) WITH ORDINALITY
    AS p(lo, hi, part)
JOIN runs AS r ON r.finished_at >= p.lo AND r.finished_at < p.hi
WHERE r.outcome = ANY(CAST(:outcomes AS text[]))
GROUP BY r.outcome, p.part
"""
_PARTS = text(_PARTS_SQL)


@cache
def _grouped_statement(parts: int) -> CompoundSelect[Any]:
    """Each part's index range grouped by outcome: the index is in outcome order, so neither
    store sorts, and an empty part costs a probe per outcome."""
    return union_all(
        *[
            select(runs.c.outcome, literal(index).label("part"), func.count())
            .where(runs.c.outcome.in_(FINISHED_OUTCOMES), *_window(index))
            .group_by(runs.c.outcome)
            for index in range(parts)
        ]
    )


def _window(index: int) -> list[ColumnElement[bool]]:
    """Finished in part ``index``."""
    finished = runs.c.finished_at
    return [
        finished >= bindparam(f"lo_{index}", type_=finished.type),
        finished < bindparam(f"hi_{index}", type_=finished.type),
    ]


def _bounds(parts: Sequence[_Range]) -> dict[str, object]:
    values: dict[str, object] = {}
    for index, (lo, hi) in enumerate(parts):
        values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
    return values


def _triples(rows: Iterable[Sequence[Any]]) -> list[tuple[str, int, int]]:
    return [(str(outcome), int(index), int(count)) for outcome, index, count in rows]
