"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job (one statement over the job's index, each slice an index
range counted by the database) or the whole installation.

The installation's chart, given the reader's ``now``, answers each slice's whole closed minutes
from the counts kept of them, and its partial minutes and the minutes not closed yet from the
runs' index: a day's chart reads some 1,440 minutes' counts and a few thousand runs, not every
run of the day.

**Closed minutes.** A finished run is never changed again, and every finish still to come is at
or after the oldest start of a running run, or after now minus :data:`SETTLE_MARGIN` (a store
transaction not committed yet): counts of minutes before both never change, except by the
retention purge, which subtracts the runs it deletes in the same transaction. The chart's reader
fills the counts the first time it needs a closed minute (one contiguous span of minutes), in
short transactions of its own, and only while the purge counter is what it was before it
counted; the firing path never writes here.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import pairwise
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    text,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import TextClause

from jobhost.records import RUNNING, TERMINAL_OUTCOMES
from jobhost.store.engine import UTCDateTime, database, database_now, is_read_only
from jobhost.store.schema import run_outcome_minutes, run_outcome_purges, run_outcome_spans, runs

__all__ = [
    "FINISHED_OUTCOMES",
    "SETTLE_MARGIN",
    "forget_runs",
    "outcome_counts",
]


FINISHED_OUTCOMES = tuple(sorted(TERMINAL_OUTCOMES))
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
    finished in it by outcome; of ``job`` when given. For every job with ``now`` (the store's
    clock), closed minutes are answered from their kept counts."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    closed = _closed_until(connection, now) if now is not None and job is None else None
    kept: list[_Range | None] = []
    live: list[_Range] = []
    slice_of: list[int] = []  # the slice each range of ``live`` is part of
    for index, (first, last) in enumerate(pairwise(edges)):
        # The slice's whole closed minutes, if any, are counted apart.
        low, high = (
            (_ceil_minute(first), min(_floor_minute(last), closed)) if closed else (last, last)
        )
        kept.append((low, high) if low < high else None)
        parts = [(first, low), (high, last)] if low < high else [(first, last)]
        live += parts
        slice_of += [index] * len(parts)
    if closed is not None:
        counts = _minute_counts(connection, kept, keep=not is_read_only(connection.engine))
    for outcome, part, n in _by_part(connection, live, job):
        _add(counts[slice_of[part]], outcome, n)
    return counts


def _by_part(
    connection: Connection, parts: Sequence[_Range], job: str | None = None, *, kept: bool = False
) -> list[tuple[str, int, int]]:
    """(outcome, part, total) of each part's runs finished in it, of ``job`` when given; with
    ``kept``, each part's kept counts of the key ``job``. One statement: on PostgreSQL one text
    for any number of parts, planned once; elsewhere a compound of each part's index range."""
    values: dict[str, object] = {"job": job, "outcomes": list(FINISHED_OUTCOMES)}
    statement: Any
    if database(connection).batches:
        values.update(lo=[lo for lo, _ in parts], hi=[hi for _, hi in parts])
        statement = _unnested(kept=kept, of_job=job is not None)
    else:
        for index, (lo, hi) in enumerate(parts):
            values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
        statement = _compound(len(parts), kept=kept, of_job=job is not None)
    found = connection.execute(statement, values)
    return [(str(outcome), int(part), int(total)) for outcome, part, total in found]


@cache
def _unnested(*, kept: bool, of_job: bool) -> TextClause:
    if kept:
        table, at, total = "run_outcome_minutes", "minute", "sum(r.runs)"
    else:
        table, at, total = "runs", "finished_at", "count(*)"
    job = "r.job_name = :job AND " if of_job else ""
    finished = "" if kept else "WHERE r.outcome = ANY(CAST(:outcomes AS text[]))"
    return text(
        f"""
SELECT r.outcome, p.part - 1, {total}
FROM unnest(CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) WITH ORDINALITY
    AS p(lo, hi, part)
JOIN {table} AS r ON {job}r.{at} >= p.lo AND r.{at} < p.hi
{finished}
GROUP BY r.outcome, p.part
"""
    )


@cache
def _compound(parts: int, *, kept: bool, of_job: bool) -> CompoundSelect[Any]:
    table = run_outcome_minutes.c if kept else runs.c
    at = table.minute if kept else table.finished_at
    where = [table.job_name == bindparam("job")] if of_job else []
    if not kept:
        where.append(table.outcome.in_(FINISHED_OUTCOMES))
    total = func.sum(table.runs) if kept else func.count()
    return union_all(
        *[
            select(table.outcome, literal(index).label("part"), total)
            .where(
                *where,
                at >= bindparam(f"lo_{index}", type_=at.type),
                at < bindparam(f"hi_{index}", type_=at.type),
            )
            .group_by(table.outcome)
            for index in range(parts)
        ]
    )


_MINUTE = timedelta(minutes=1)
SETTLE_MARGIN = timedelta(minutes=10)
"""Longer than any store transaction takes from reading its clock to committing: a minute is
not closed before it is this old."""

_CHUNK = timedelta(days=1)
"""The most minutes one writing transaction keeps (SQLite's writers wait while it writes)."""
_EVERY_JOB = ""
_log = logging.getLogger("jobhost.store")

_Row = tuple[datetime, str, int]


def _closed_until(connection: Connection, now: datetime) -> datetime:
    """The start of the first minute that is not closed."""
    # A caller's clock ahead of the database's must not close a minute early.
    now = min(now, database_now(connection, lambda: now))
    horizon = now - SETTLE_MARGIN
    oldest = connection.execute(_OLDEST_RUNNING).scalar()
    if oldest is not None:
        horizon = min(horizon, oldest)
    return _floor_minute(horizon)


def _minute_counts(
    connection: Connection, wanted: Sequence[_Range | None], *, keep: bool
) -> list[dict[str, int]]:
    """Runs of every job finished in each range of whole closed minutes of ``wanted`` (sorted,
    disjoint), by outcome; minutes not kept yet are counted from the runs, and kept if ``keep``."""
    counts: list[dict[str, int]] = [{} for _ in wanted]
    present = [one for one in wanted if one is not None]
    if not present:
        return counts
    low, high = present[0][0], present[-1][1]
    purges = connection.execute(select(run_outcome_purges.c.purges)).scalar()
    span = _span(connection)
    kept_from, kept_to = span if span is not None else (high, high)
    clipped = [
        (max(one[0], kept_from), min(one[1], kept_to)) if one is not None else (low, low)
        for one in wanted
    ]
    for outcome, index, total in _by_part(connection, clipped, _EVERY_JOB, kept=True):
        _add(counts[index], outcome, total)
    below = _counted(connection, (low, kept_from)) if low < kept_from else []
    above = _counted(connection, (kept_to, high)) if high > kept_to else []
    _place(counts, wanted, [*below, *above])
    if keep and purges is not None and (low < kept_from or high > kept_to):
        _keep(connection, span=span, asked=(low, high), rows=[*below, *above], purges=purges)
    return counts


def forget_runs(
    connection: Connection, finished: Iterable[tuple[str, str, datetime | None]]
) -> None:
    """In the transaction deleting them: subtract runs (job, outcome, finished at) from the
    kept counts (rows kept per job by older versions too, so they drain), and mark the counts a
    reader made before this purge as not to be kept."""
    connection.execute(update(run_outcome_purges).values(purges=run_outcome_purges.c.purges + 1))
    gone: Counter[tuple[str, datetime, str]] = Counter()
    for job, outcome, finished_at in finished:
        if finished_at is None:
            continue
        minute = _floor_minute(finished_at)
        gone[(job, minute, outcome)] += 1
        gone[(_EVERY_JOB, minute, outcome)] += 1
    if not gone:
        return
    rows = [
        {"b_job": job, "b_minute": minute, "b_outcome": outcome, "b_runs": n}
        for (job, minute, outcome), n in sorted(gone.items())
    ]
    table = run_outcome_minutes.c
    same = (
        table.job_name == bindparam("b_job"),
        table.minute == bindparam("b_minute", type_=table.minute.type),
        table.outcome == bindparam("b_outcome"),
    )
    connection.execute(
        update(run_outcome_minutes).where(*same).values(runs=table.runs - bindparam("b_runs")),
        rows,
    )
    connection.execute(delete(run_outcome_minutes).where(*same, table.runs <= 0), rows)


def _floor_minute(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(second=0, microsecond=0)


def _ceil_minute(instant: datetime) -> datetime:
    floor = _floor_minute(instant)
    return floor if floor == instant else floor + _MINUTE


def _span(connection: Connection, *, lock: bool = False) -> _Range | None:
    query = select(run_outcome_spans.c.filled_from, run_outcome_spans.c.filled_to).where(
        run_outcome_spans.c.job_name == _EVERY_JOB
    )
    found = connection.execute(query.with_for_update() if lock else query).first()
    return (found[0], found[1]) if found is not None else None


def _counted(connection: Connection, part: _Range) -> list[_Row]:
    statement = _count_statement(database(connection).typed)
    found = connection.execute(statement, {"lo": part[0], "hi": part[1]})
    return [(minute, str(outcome), int(n)) for minute, outcome, n in found]


def _place(counts: list[dict[str, int]], wanted: Sequence[_Range | None], rows: list[_Row]) -> None:
    """Add each minute's counts to the range of ``wanted`` holding it (a gap's to none)."""
    indexed = [(one, index) for index, one in enumerate(wanted) if one is not None]
    firsts = [one[0] for one, _ in indexed]
    for minute, outcome, n in rows:
        at = bisect_right(firsts, minute) - 1
        if at >= 0 and minute < indexed[at][0][1]:
            _add(counts[indexed[at][1]], outcome, n)


def _keep(
    connection: Connection, *, span: _Range | None, asked: _Range, rows: list[_Row], purges: int
) -> None:
    """Write the counted minutes a day at a time, each transaction growing the span by its
    chunk, and only while neither the purge counter nor the span moved since they were read."""
    kept_from, kept_to = span if span is not None else (asked[1], asked[1])
    expected = span
    pieces: list[_Range] = []  # outward from the span, on both sides
    edge = kept_from
    while edge > asked[0]:
        pieces.append((max(asked[0], edge - _CHUNK), edge))
        edge = pieces[-1][0]
    edge = kept_to
    while edge < asked[1]:
        pieces.append((edge, min(asked[1], edge + _CHUNK)))
        edge = pieces[-1][1]
    try:
        for lo, hi in pieces:
            piece = [r for r in rows if lo <= r[0] < hi]
            grown = (min(lo, kept_from), max(hi, kept_to))
            with connection.engine.begin() as writer:
                purged = writer.execute(
                    select(run_outcome_purges.c.purges).with_for_update(read=True)
                ).scalar()
                found = _span(writer, lock=True)
                if purged != purges or found != expected:
                    return  # a purge since, or another reader kept these minutes first
                values = {"filled_from": grown[0], "filled_to": grown[1]}
                if found is None:
                    writer.execute(insert(run_outcome_spans).values(job_name=_EVERY_JOB, **values))
                else:
                    writer.execute(
                        update(run_outcome_spans)
                        .where(run_outcome_spans.c.job_name == _EVERY_JOB)
                        .values(**values)
                    )
                if piece:
                    writer.execute(
                        insert(run_outcome_minutes),
                        [
                            {"job_name": _EVERY_JOB, "minute": at, "outcome": outcome, "runs": n}
                            for at, outcome, n in piece
                        ],
                    )
            expected = grown
            kept_from, kept_to = grown
    except SQLAlchemyError as error:
        # The chart is answered either way; the next reader counts these minutes again.
        _log.debug("the chart's minute counts were not kept: %s", error)


def _add(counts: dict[str, int], outcome: str, n: int) -> None:
    if n:
        counts[outcome] = counts.get(outcome, 0) + n


# finished_at IS NULL (true of every running run) makes the (outcome, finished_at) index the
# obvious one: a few entries.
_OLDEST_RUNNING = select(func.min(func.coalesce(runs.c.started_at, runs.c.queued_at))).where(
    runs.c.outcome == RUNNING, runs.c.finished_at.is_(None)
)


@cache
def _count_statement(typed: bool) -> Any:
    finished = runs.c.finished_at
    if typed:
        minute: Any = func.date_bin(
            literal(_MINUTE), finished, literal(datetime(2000, 1, 1, tzinfo=UTC))
        )
    else:
        minute = func.substr(finished, 1, 16).concat(":00")  # the text of the minute's start
    placed = select(type_coerce(minute, UTCDateTime()).label("minute"), runs.c.outcome).where(
        runs.c.outcome.in_(FINISHED_OUTCOMES),
        finished >= bindparam("lo", type_=finished.type),
        finished < bindparam("hi", type_=finished.type),
    )
    inner = placed.subquery()
    return select(inner.c.minute, inner.c.outcome, func.count()).group_by(
        inner.c.minute, inner.c.outcome
    )
