"""The runs-by-outcome chart at a million runs a day:
``python benchmarks/outcome_chart.py [sqlite|postgres ...]``.

Seeds ``CHART_ROWS`` runs (default 1,000,000) finished over the last 24 hours across 10,000
jobs (2% failed, 1% missed, 1% timed out), bulk-inserted as ``benchmarks/console.py`` does
(PostgreSQL from ``JOBHOST_TEST_POSTGRES_URL`` in a schema of its own, vacuumed and analysed
as autovacuum would leave it), then prints, best of ``REPEAT`` after one warm-up, how long the
store takes to count:

- the Failures page's installation chart over 24 hours (24 slices) and 1 hour (12 slices);
- one job's chart over 24 hours (its job page);

each as the chart counts it now (closed minutes from their kept counts, the rest from the
runs: ``kept``), its first look (which counts and keeps those minutes: ``first``), every run
counted from the index (``live``, the chart without kept counts), and the statement the chart
used before that (one CASE over the slices' bounds per row, grouped: ``case``), all in the same
invocation, with the ratio of ``live`` to ``kept``. The machine is shared: the load is printed
with the figures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta

from console import _COLUMNS, _sqlite, _store  # type: ignore[import-not-found]
from sqlalchemy import case, func, select, text
from sqlalchemy.engine import Connection, Engine

from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.outcome_counts import FINISHED_OUTCOMES, outcome_counts
from jobhost.store.schema import runs

ROWS = int(os.environ.get("CHART_ROWS", "1000000"))
JOBS = 10_000
REPEAT = 3
_Counts = list[dict[str, int]]


def main(backends: list[str]) -> None:
    print(f"{ROWS} runs finished in the last 24 h; best of {REPEAT} (ms)")
    for backend in backends or ["sqlite", "postgres"]:
        with tempfile.TemporaryDirectory() as directory, _store(backend, directory) as url:
            engine = create_store_engine(url)
            upgrade(engine)
            now = datetime.now(UTC)
            seeded = time.perf_counter()
            _seed(engine, _rows(now))
            print(f"{backend}: seeded in {time.perf_counter() - seeded:.0f} s")
            _measure(backend, engine, now)
            engine.dispose()


def _measure(backend: str, engine: Engine, now: datetime) -> None:
    day, hour = timedelta(hours=24), timedelta(hours=1)
    figures = [
        ("installation, 24 h", now - day, 24, None),
        ("installation, 1 h", now - hour, 12, None),
        ("one job, 24 h", now - day, 24, "job-00042"),
    ]
    for name, start, slices, job in figures:
        window = (start, now, slices, job)
        started = time.perf_counter()
        with reading(engine) as connection:
            first_counted = _kept_counts(connection, *window)
        first = time.perf_counter() - started
        new, counted = _best(engine, _kept_counts, window)
        live, counted_live = _best(engine, outcome_counts, window)
        old, before = _best(engine, _case_counts, window)
        assert counted == first_counted == counted_live == before, f"{name}: the counts disagree"
        runs_counted = sum(sum(one.values()) for one in counted)
        print(
            f"  {backend:8} {name:20} kept {new * 1000:7.1f}  first {first * 1000:7.1f}  "
            f"live {live * 1000:7.1f}  case {old * 1000:7.1f}  "
            f"{live / new:5.1f}x faster than live  ({runs_counted} runs)"
        )
    print(f"  load: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} on {os.cpu_count()} cores")


def _best(
    engine: Engine,
    count: Callable[[Connection, datetime, datetime, int, str | None], _Counts],
    window: tuple[datetime, datetime, int, str | None],
) -> tuple[float, _Counts]:
    with reading(engine) as connection:
        counted = count(connection, *window)
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        with reading(engine) as connection:
            count(connection, *window)
        times.append(time.perf_counter() - started)
    return min(times), counted


def _kept_counts(
    connection: Connection, start: datetime, end: datetime, slices: int, job: str | None
) -> _Counts:
    """The chart as the dashboard counts it: ``end`` is the store's now."""
    return outcome_counts(connection, start, end, slices, job, now=end)


def _case_counts(
    connection: Connection, start: datetime, end: datetime, slices: int, job: str | None
) -> _Counts:
    """The statement the chart used before: each row's slice as a CASE over the bounds."""
    width = (end - start) / slices
    bounds = [start + width * (index + 1) for index in range(slices - 1)]
    slice_of = case(
        *[(runs.c.finished_at < bound, index) for index, bound in enumerate(bounds)],
        else_=slices - 1,
    ).label("slice")
    rows = select(runs.c.outcome, slice_of).where(
        runs.c.outcome.in_(FINISHED_OUTCOMES), runs.c.finished_at >= start, runs.c.finished_at < end
    )
    if job is not None:
        rows = rows.where(runs.c.job_name == job)
    placed = rows.subquery()
    query = select(placed.c.outcome, placed.c.slice, func.count()).group_by(
        placed.c.outcome, placed.c.slice
    )
    counts: _Counts = [{} for _ in range(slices)]
    for outcome, index, count in connection.execute(query):
        counts[int(index)][str(outcome)] = int(count)
    return counts


def _seed(engine: Engine, rows: Iterable[tuple[object, ...]]) -> None:
    """Bulk-insert ``rows`` (``_COLUMNS`` in order) into ``runs``: COPY on PostgreSQL, one
    executemany in one transaction on SQLite; then ANALYZE on PostgreSQL."""
    raw = engine.raw_connection()
    try:
        if engine.dialect.name == "postgresql":
            with raw.cursor() as cursor:
                cursor.execute("SET statement_timeout = 0")
            with raw.cursor() as cursor, cursor.copy(f"COPY runs ({_COLUMNS}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                for row in rows:
                    copy.write_row(row)
            raw.commit()
        else:
            cursor = raw.cursor()
            cursor.execute("BEGIN")
            cursor.executemany(
                f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * 13)})",
                (tuple(_sqlite(value) for value in row) for row in rows),
            )
            cursor.execute("COMMIT")
    finally:
        raw.close()
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("SET statement_timeout = 0"))
            connection.execute(text("VACUUM ANALYZE runs"))


def _rows(now: datetime) -> Iterator[tuple[object, ...]]:
    for index in range(ROWS):
        finished = now - timedelta(seconds=86_400 * (index + 0.5) / ROWS)
        kind = index % 100
        outcome = (
            "failed"
            if kind < 2
            else "missed"
            if kind == 2
            else "timed_out"
            if kind == 3
            else "succeeded"
        )
        started = None if outcome == "missed" else finished - timedelta(seconds=2)
        yield (
            uuid.uuid4().hex,
            f"job-{index % JOBS:05d}",
            finished,
            0 if outcome == "missed" else 1,
            "schedule",
            outcome,
            "bench-host",
            index,
            finished,
            started,
            finished,
            None,
            None,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
