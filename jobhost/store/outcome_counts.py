"""How many runs finished with each outcome, in equal slices of a time range: the dashboard's
runs-by-outcome chart, for one job or the whole installation.

The installation's chart, given the reader's ``now``, answers each slice in three parts: its
whole minutes that are closed (no run can still finish in them) from the counts kept of them,
and its partial first and last minutes plus any minutes not closed yet from the runs' index
``ix_runs_outcome_finished_at``. A day's chart of a busy installation then reads some 1,440
minutes' counts and a few thousand runs, not every run of the day. Without ``now`` every slice
is counted from the runs. Firing writes nothing for the chart either way. The statements' text
depends only on how many slices there are, so each is prepared once.

**One job's chart** is one statement over the job's index
(``ix_runs_job_name_outcome_finished_at``), each entry placed in its slice by the database; it
reads nothing kept (a job's runs in a minute are at most that minute's count, so kept counts
save a job nothing). On PostgreSQL, ``width_bucket`` over the slices' lower bounds (exact for
timestamps, a binary search per entry), one text for every number of slices. On SQLite, a count
of each slice's index range per outcome, all in one compound statement (7 outcomes by at most
30 slices stays under SQLite's 500 parts); counting an index range steps through entries
without reading or sorting rows.

**Kept counts of closed minutes.** A minute is closed once no run can still finish in it. A
run's ``finished_at`` is never before its ``started_at`` (the end is clamped to the claim),
every other finish (missed, skipped, abandoned, cancelled before it started) is written at the
writer's clock, and a finished run is never changed again. So every finish still to come is at
or after the oldest start of a running run, or at or after now minus :data:`SETTLE_MARGIN` (a
store transaction that read the clock and has not committed yet). Counts of minutes before both
never change, except by the retention purge, which subtracts the runs it deletes in the
transaction that deletes them. The installation chart's reader fills the counts the first time
it needs a closed minute (one span of minutes, contiguous, so a minute inside with no row had no
run), counting from the reader's own snapshot and writing in short transactions of their own;
the firing path never writes here. A reader writes only while the purge counter is what it was
before it counted: counts made before a purge committed are answered but not kept.
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
    ColumnElement,
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
from jobhost.store.engine import database, database_now, is_read_only
from jobhost.store.schema import run_outcome_minutes, run_outcome_purges, run_outcome_spans, runs

__all__ = [
    "FINISHED_OUTCOMES",
    "SETTLE_MARGIN",
    "counts_before",
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
    finished in it by outcome (outcomes with none left out); of ``job`` when given, in one
    statement. For every job with ``now`` (the store's clock), closed minutes are answered
    from their kept counts."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    if job is not None:
        return _job_counts(connection, edges, job)
    closed = _closed_until(connection, now) if now is not None else None
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
        counts = _minute_counts(connection, kept, keep=keep)
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
    low, high = _ceil_minute(first), min(_floor_minute(last), closed)
    return (low, high) if low < high else None


def _live(connection: Connection, parts: list[_Range]) -> list[tuple[str, int, int]]:
    """Each part's runs by outcome, counted from the runs' index in one statement."""
    if database(connection).batches:
        # One text for any number of parts, planned once: a nested loop of index range scans.
        values: dict[str, object] = {
            "lo": [lo for lo, _ in parts],
            "hi": [hi for _, hi in parts],
            "outcomes": list(FINISHED_OUTCOMES),
        }
        return _triples(connection.execute(_PARTS, values))
    statement = _grouped_statement(len(parts))
    return _triples(connection.execute(statement, _bounds(parts)))


_PARTS = text(
    """
SELECT r.outcome, p.part - 1, count(*)
FROM unnest(CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) WITH ORDINALITY
    AS p(lo, hi, part)
JOIN runs AS r ON r.finished_at >= p.lo AND r.finished_at < p.hi
WHERE r.outcome = ANY(CAST(:outcomes AS text[]))
GROUP BY r.outcome, p.part
"""
)


@cache
def _grouped_statement(parts: int, of_job: bool = False) -> CompoundSelect[Any]:
    """Each part's index range grouped by outcome (``of_job``: of the job bound as ``job``):
    the index is in outcome order, so neither store sorts, and an empty part costs a probe per
    outcome."""
    job = [runs.c.job_name == bindparam("job")] if of_job else []
    where = [*job, runs.c.outcome.in_(FINISHED_OUTCOMES)]
    return _per_part(parts, runs.c.outcome, func.count(), runs.c.finished_at, where)


@cache
def _kept_statement(parts: int) -> CompoundSelect[Any]:
    """Each range's kept counts by outcome, one index range of the primary key each."""
    table = run_outcome_minutes.c
    job = [table.job_name == bindparam("job")]
    return _per_part(parts, table.outcome, func.sum(table.runs), table.minute, job)


def _per_part(
    parts: int,
    outcome: ColumnElement[Any],
    total: ColumnElement[Any],
    at: ColumnElement[Any],
    where: list[ColumnElement[bool]],
) -> CompoundSelect[Any]:
    """``total`` by ``outcome`` for each part ``index``, ``at`` in [``lo_index``,
    ``hi_index``), in one compound statement."""
    return union_all(
        *[
            select(outcome, literal(index).label("part"), total)
            .where(
                *where,
                at >= bindparam(f"lo_{index}", type_=at.type),
                at < bindparam(f"hi_{index}", type_=at.type),
            )
            .group_by(outcome)
            for index in range(parts)
        ]
    )


def _bounds(parts: Sequence[_Range]) -> dict[str, object]:
    values: dict[str, object] = {}
    for index, (lo, hi) in enumerate(parts):
        values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
    return values


def _triples(rows: Iterable[Sequence[Any]]) -> list[tuple[str, int, int]]:
    return [(str(outcome), int(index), int(count)) for outcome, index, count in rows]


def _job_counts(connection: Connection, edges: Sequence[Any], job: str) -> list[dict[str, int]]:
    """Runs of ``job`` finished in each slice [edges[i], edges[i + 1]), by outcome."""
    slices = len(edges) - 1
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    if database(connection).batches:
        values: dict[str, object] = {
            "job": job,
            "outcomes": list(FINISHED_OUTCOMES),
            "lows": list(edges[:-1]),
            "lo": edges[0],
            "hi": edges[-1],
        }
        found = connection.execute(_BUCKETED, values)
        placed = [(outcome, int(bucket) - 1, n) for outcome, bucket, n in found]
    else:
        values = {"job": job, **_bounds(list(pairwise(edges)))}
        placed = _triples(connection.execute(_grouped_statement(slices, of_job=True), values))
    for outcome, index, n in placed:
        if n:
            counts[int(index)][str(outcome)] = int(n)
    return counts


# ``width_bucket`` answers i + 1 for an entry in [lows[i], lows[i + 1]); the range's own bounds
# stay in the WHERE clause so the index scan reads only the range.
_BUCKETED = text(
    """
SELECT outcome, width_bucket(finished_at, CAST(:lows AS timestamptz[])), count(*)
FROM runs
WHERE job_name = :job AND outcome = ANY(CAST(:outcomes AS text[]))
    AND finished_at >= :lo AND finished_at < :hi
GROUP BY 1, 2
"""
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


def _span(connection: Connection, key: str, *, lock: bool = False) -> _Range | None:
    query = select(run_outcome_spans.c.filled_from, run_outcome_spans.c.filled_to).where(
        run_outcome_spans.c.job_name == key
    )
    found = connection.execute(query.with_for_update() if lock else query).first()
    return (found[0], found[1]) if found is not None else None


def _counted(connection: Connection, part: _Range) -> list[_Row]:
    """The runs finished in ``part`` by minute and outcome, counted from the runs."""
    bounds = {"lo": part[0], "hi": part[1]}
    db = database(connection)
    found = connection.execute(_count_statement(db.typed), bounds)
    if db.typed:
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
        found = _span(writer, key, lock=True)
        if found != expected:
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
    if database(connection).batches:
        values = {"lo": [lo for lo, _ in ranges], "hi": [hi for _, hi in ranges], "job": key}
        return connection.execute(_KEPT_RANGES, values)
    return connection.execute(_kept_statement(len(ranges)), {"job": key, **_bounds(ranges)})


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
        minute = func.substr(finished, 1, 16)
    placed = select(minute.label("minute"), runs.c.outcome).where(
        runs.c.outcome.in_(FINISHED_OUTCOMES),
        finished >= bindparam("lo", type_=finished.type),
        finished < bindparam("hi", type_=finished.type),
    )
    inner = placed.subquery()
    return select(inner.c.minute, inner.c.outcome, func.count()).group_by(
        inner.c.minute, inner.c.outcome
    )
