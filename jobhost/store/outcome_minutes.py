"""Kept counts of closed minutes for the runs-by-outcome chart, so a chart costs what its minutes
cost, not what its runs cost.

A minute is closed once no run can still finish in it. A run's ``finished_at`` is never before
its ``started_at`` (the end is clamped to the claim), every other finish (missed, skipped,
abandoned, cancelled before it started) is written at the writer's clock, and a finished run is
never changed again. So every finish still to come is at or after the oldest start of a running
run, or at or after now minus :data:`SETTLE_MARGIN` (a store transaction that read the clock
and has not committed yet). Counts of minutes before both never change, except by the retention
purge, which subtracts the runs it deletes in the transaction that deletes them.

The installation chart's reader fills the counts the first time it needs a closed minute (one
span of minutes, contiguous, so a minute inside with no row had no run), counting from the
reader's own snapshot and writing in short transactions of their own; the firing path never
writes here. A reader writes only while the purge counter is what it was before it counted:
counts made before a purge committed are answered but not kept. One job's chart reads none of
this (:mod:`jobhost.store.job_outcome_counts`).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
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
    union_all,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from jobhost.records import RUNNING, TERMINAL_OUTCOMES
from jobhost.store.clock import database_now
from jobhost.store.schema import run_outcome_minutes, run_outcome_purges, run_outcome_spans, runs

__all__ = ["MINUTE", "SETTLE_MARGIN", "closed_until", "forget_runs", "minute_counts"]

MINUTE = timedelta(minutes=1)
SETTLE_MARGIN = timedelta(minutes=10)
"""Longer than any store transaction takes from reading its clock to committing: a minute is
not closed before it is this old."""

_CHUNK = timedelta(days=1)
"""The most minutes one writing transaction keeps (SQLite's writers wait while it writes)."""
_EVERY_JOB = ""
_log = logging.getLogger("jobhost.store")

_Range = tuple[datetime, datetime]
_Row = tuple[datetime, str, int]


def closed_until(connection: Connection, now: datetime) -> datetime:
    """The start of the first minute that is not closed."""
    if connection.dialect.name == "postgresql":
        # A caller's clock ahead of the database's must not close a minute early.
        now = min(now, database_now(connection, lambda: now))
    horizon = now - SETTLE_MARGIN
    oldest = connection.execute(_OLDEST_RUNNING).scalar()
    if oldest is not None:
        horizon = min(horizon, oldest)
    return floor_minute(horizon)


def minute_counts(
    connection: Connection, wanted: Sequence[_Range | None], *, keep: bool
) -> list[dict[str, int]]:
    """Runs of every job finished in each range of whole closed minutes of ``wanted`` (sorted,
    disjoint), by outcome; the minutes not kept yet are counted from the runs, and kept when
    ``keep``."""
    counts: list[dict[str, int]] = [{} for _ in wanted]
    present = [one for one in wanted if one is not None]
    if not present:
        return counts
    low, high = present[0][0], present[-1][1]
    key = _EVERY_JOB
    purges = connection.execute(select(run_outcome_purges.c.purges)).scalar()
    span = _span(connection, key)
    kept_from, kept_to = span if span is not None else (high, high)
    clipped = [
        (max(one[0], kept_from), min(one[1], kept_to)) if one is not None else (low, low)
        for one in wanted
    ]
    for outcome, index, total in _kept(connection, clipped, key):
        _add(counts[int(index)], str(outcome), int(total))
    below = _counted(connection, (low, kept_from)) if low < kept_from else []
    above = _counted(connection, (kept_to, high)) if high > kept_to else []
    _place(counts, wanted, [*below, *above])
    if keep and purges is not None and (low < kept_from or high > kept_to):
        _keep(
            connection, key, span=span, asked=(low, high), below=below, above=above, purges=purges
        )
    return counts


def forget_runs(
    connection: Connection, finished: Iterable[tuple[str, str, datetime | None]]
) -> None:
    """In the transaction deleting them: subtract runs (job, outcome, finished at) from the
    kept counts, and mark the counts a reader made before this purge as not to be kept.

    Rows kept per job (before one job's chart counted from its index) still lose their runs
    here, so they drain as the purge deletes them and are never left wrong."""
    connection.execute(update(run_outcome_purges).values(purges=run_outcome_purges.c.purges + 1))
    gone: Counter[tuple[str, datetime, str]] = Counter()
    for job, outcome, finished_at in finished:
        if finished_at is None:
            continue
        minute = floor_minute(finished_at)
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


def floor_minute(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(second=0, microsecond=0)


def ceil_minute(instant: datetime) -> datetime:
    floor = floor_minute(instant)
    return floor if floor == instant else floor + MINUTE


def _span(connection: Connection, key: str) -> _Range | None:
    found = connection.execute(
        select(run_outcome_spans.c.filled_from, run_outcome_spans.c.filled_to).where(
            run_outcome_spans.c.job_name == key
        )
    ).first()
    return (found[0], found[1]) if found is not None else None


def _counted(connection: Connection, part: _Range) -> list[_Row]:
    """The runs finished in ``part`` by minute and outcome, counted from the runs."""
    bounds = {"lo": part[0], "hi": part[1]}
    statement = _count_statement(connection.dialect.name)
    found = connection.execute(statement, bounds)
    if connection.dialect.name == "postgresql":
        return [(minute.astimezone(UTC), str(outcome), int(n)) for minute, outcome, n in found]
    return [
        (datetime.fromisoformat(f"{minute}:00").replace(tzinfo=UTC), str(outcome), int(n))
        for minute, outcome, n in found
    ]


def _place(counts: list[dict[str, int]], wanted: Sequence[_Range | None], rows: list[_Row]) -> None:
    """Add each minute's counts to the range of ``wanted`` holding it (a gap's to none)."""
    starts = [one[0] if one is not None else None for one in wanted]
    indexed = [(start, index) for index, start in enumerate(starts) if start is not None]
    firsts = [start for start, _ in indexed]
    for minute, outcome, n in rows:
        at = bisect_right(firsts, minute) - 1
        if at < 0:
            continue
        index = indexed[at][1]
        one = wanted[index]
        if one is not None and minute < one[1]:
            _add(counts[index], outcome, n)


def _keep(
    connection: Connection,
    key: str,
    *,
    span: _Range | None,
    asked: _Range,
    below: list[_Row],
    above: list[_Row],
    purges: int,
) -> None:
    """Write the counted minutes a day at a time, each transaction growing the span by its
    chunk, and only while neither the purge counter nor the span moved since they were read."""
    kept_from, kept_to = span if span is not None else (asked[1], asked[1])
    expected = span
    pieces: list[tuple[_Range, list[_Row]]] = []
    edge = kept_from
    while edge > asked[0]:
        lo = max(asked[0], edge - _CHUNK)
        pieces.append(((lo, edge), [r for r in below if lo <= r[0] < edge]))
        edge = lo
    edge = kept_to
    while edge < asked[1]:
        hi = min(asked[1], edge + _CHUNK)
        pieces.append(((edge, hi), [r for r in above if edge <= r[0] < hi]))
        edge = hi
    try:
        for (lo, hi), rows in pieces:
            grown = (min(lo, kept_from), max(hi, kept_to))
            if not _write_piece(
                connection, key, expected=expected, grown=grown, rows=rows, purges=purges
            ):
                return
            expected = grown
            kept_from, kept_to = grown
    except SQLAlchemyError as error:
        # The chart is answered either way; the next reader counts these minutes again.
        _log.debug("the chart's minute counts of %r were not kept: %s", key or "every job", error)


def _write_piece(
    connection: Connection,
    key: str,
    *,
    expected: _Range | None,
    grown: _Range,
    rows: list[_Row],
    purges: int,
) -> bool:
    with connection.engine.begin() as writer:
        now_purges = writer.execute(
            select(run_outcome_purges.c.purges).with_for_update(read=True)
        ).scalar()
        if now_purges != purges:
            return False
        found = writer.execute(
            select(run_outcome_spans.c.filled_from, run_outcome_spans.c.filled_to)
            .where(run_outcome_spans.c.job_name == key)
            .with_for_update()
        ).first()
        if (None if found is None else (found[0], found[1])) != expected:
            return False  # another reader kept these minutes first
        values = {"filled_from": grown[0], "filled_to": grown[1]}
        if found is None:
            writer.execute(insert(run_outcome_spans).values(job_name=key, **values))
        else:
            writer.execute(
                update(run_outcome_spans)
                .where(run_outcome_spans.c.job_name == key)
                .values(**values)
            )
        if rows:
            writer.execute(
                insert(run_outcome_minutes),
                [
                    {"job_name": key, "minute": minute, "outcome": outcome, "runs": n}
                    for minute, outcome, n in rows
                ],
            )
    return True


def _kept(connection: Connection, ranges: list[_Range], key: str) -> Iterable[Any]:
    if connection.dialect.name == "postgresql":
        values = {"lo": [lo for lo, _ in ranges], "hi": [hi for _, hi in ranges], "job": key}
        return connection.execute(_KEPT_RANGES, values)
    return connection.execute(_kept_statement(len(ranges)), _ranges(ranges, key))


# PostgreSQL: one text for any number of ranges, planned once.
_KEPT_RANGES = text(
    """
SELECT m.outcome, p.part - 1, sum(m.runs)
FROM unnest(CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) WITH ORDINALITY
    AS p(lo, hi, part)
JOIN run_outcome_minutes AS m
    ON m.job_name = :job AND m.minute >= p.lo AND m.minute < p.hi
GROUP BY m.outcome, p.part
"""
)


def _add(counts: dict[str, int], outcome: str, n: int) -> None:
    if n:
        counts[outcome] = counts.get(outcome, 0) + n


def _ranges(ranges: Sequence[_Range], key: str) -> dict[str, object]:
    values: dict[str, object] = {"job": key}
    for index, (lo, hi) in enumerate(ranges):
        values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
    return values


# finished_at IS NULL (true of every running run) makes the (outcome, finished_at) index the
# obvious one: a few entries.
_OLDEST_RUNNING = select(func.min(func.coalesce(runs.c.started_at, runs.c.queued_at))).where(
    runs.c.outcome == RUNNING, runs.c.finished_at.is_(None)
)


@cache
def _kept_statement(parts: int) -> CompoundSelect[Any]:
    """Each range's kept counts by outcome, one index range of the primary key each."""
    table = run_outcome_minutes.c
    minute = table.minute.type
    return union_all(
        *[
            select(table.outcome, literal(index).label("part"), func.sum(table.runs))
            .where(
                table.job_name == bindparam("job"),
                table.minute >= bindparam(f"lo_{index}", type_=minute),
                table.minute < bindparam(f"hi_{index}", type_=minute),
            )
            .group_by(table.outcome)
            for index in range(parts)
        ]
    )


@cache
def _count_statement(dialect: str) -> Any:
    finished = runs.c.finished_at
    if dialect == "postgresql":
        minute: Any = func.date_bin(
            literal(MINUTE), finished, literal(datetime(2000, 1, 1, tzinfo=UTC))
        )
    else:
        minute = func.substr(finished, 1, 16)
    placed = select(minute.label("minute"), runs.c.outcome).where(
        runs.c.outcome.in_(sorted(TERMINAL_OUTCOMES)),
        finished >= bindparam("lo", type_=finished.type),
        finished < bindparam("hi", type_=finished.type),
    )
    inner = placed.subquery()
    return select(inner.c.minute, inner.c.outcome, func.count()).group_by(
        inner.c.minute, inner.c.outcome
    )
