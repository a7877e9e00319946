"""What one backfill run costs the host in SQL: ``python benchmarks/backfill_statements.py``.

Starts a real ``jobhost run`` (through ``_scale_host.py``, which counts SQL) with no scheduled
job but the nightly ``bench.backfill``, lets it idle for ``--idle`` seconds (its loop's own
statements, measured as a rate), then starts ``jobhost backfill bench.backfill --no-wait`` over
``--occurrences`` past nights at ``--concurrency`` (a process of its own, not counted) and waits
until the store says the backfill is done. Printed per store: the host's statements and
transactions per backfill run over that stretch, the idle rate's share taken off, by thread.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _scale_backfill import BACKFILL_JOB, backfill_command
from _scale_measure import jobhost_launch, read_fires, sql_counts, wait_for
from _scale_system import Children, Postgres
from sqlalchemy import create_engine, text


def main() -> None:
    arguments = _arguments()
    children = Children()
    postgres = Postgres(arguments.postgres_url) if "postgres" in arguments.stores else None
    print(
        f"statements per backfill run: {arguments.occurrences} past nights of {BACKFILL_JOB} at "
        f"concurrency {arguments.concurrency}, host with no other job; the host's idle rate "
        f"over {arguments.idle:g}s taken off"
    )
    print(f"{'store':<8} {'runs':>5} {'seconds':>8} {'SQL/run':>8} {'tx/run':>7}  by thread")
    try:
        for store in arguments.stores:
            with tempfile.TemporaryDirectory(prefix="jobhost-bfsql-") as root:
                _measure(store, Path(root), children, postgres, arguments)
    finally:
        children.stop_all()
        if postgres is not None:
            postgres.drop_all()
            postgres.engine.dispose()


def _measure(
    store: str,
    directory: Path,
    children: Children,
    postgres: Postgres | None,
    arguments: argparse.Namespace,
) -> None:
    if store == "postgres":
        assert postgres is not None
        url = postgres.create(f"bfsql-{uuid.uuid4().hex[:8]}")
    else:
        url = f"sqlite:///{directory}/store.db"
    launch = jobhost_launch(directory, url, 0, "every-second", backfill_job=True)
    if arguments.texts:
        launch.env["BENCH_SQL_TEXTS"] = "1"
    host = children.start(launch.argv, launch.env, launch.output)
    if not wait_for(lambda: _live(url), arguments.start_timeout, [host]):
        sys.exit(f"{store}: the host did not start: see {launch.output}")
    time.sleep(1.0)
    idle_before, idle_at = sql_counts(launch.counts), time.monotonic()
    time.sleep(arguments.idle)
    before, started = sql_counts(launch.counts), time.monotonic()
    idle_seconds = started - idle_at
    idle = {
        kind: _delta(before.get(kind, {}), idle_before.get(kind, {}))
        for kind in ("statements", "transactions")
    }
    command = backfill_command(launch.argv, arguments.occurrences, arguments.concurrency)
    subprocess.run(command, env=launch.env, check=True, capture_output=True)
    if not wait_for(lambda: _done(url), arguments.timeout, [host]):
        sys.exit(f"{store}: the backfill did not finish in {arguments.timeout:g}s")
    seconds = time.monotonic() - started
    time.sleep(0.7)  # the wrapper writes its counts every half second
    after = sql_counts(launch.counts)
    children.stop(host)
    runs = sum(1 for _, job, _, _ in read_fires(directory) if job == BACKFILL_JOB)
    per: dict[str, dict[str, float]] = {}
    for kind in ("statements", "transactions"):
        delta = _delta(after.get(kind, {}), before.get(kind, {}))
        per[kind] = {
            thread: (count - idle[kind].get(thread, 0) * seconds / idle_seconds) / max(runs, 1)
            for thread, count in delta.items()
        }
    threads = ", ".join(
        f"{thread} {value:.1f}"
        for thread, value in sorted(per["statements"].items(), key=lambda item: -item[1])
        if abs(value) >= 0.05
    )
    print(
        f"{store:<8} {runs:>5} {seconds:>8.1f} {sum(per['statements'].values()):>8.1f} "
        f"{sum(per['transactions'].values()):>7.1f}  {threads}",
        flush=True,
    )
    if arguments.texts:
        texts = _delta(after.get("texts", {}), before.get("texts", {}))
        for text_, count in sorted(texts.items(), key=lambda item: -item[1]):
            if count / max(runs, 1) >= 0.05:
                print(f"    {count / max(runs, 1):>6.2f}  {text_}")


def _live(url: str) -> bool:
    return bool(_scalar(url, "SELECT count(*) FROM hosts WHERE stopped_at IS NULL"))


def _done(url: str) -> bool:
    return bool(_scalar(url, "SELECT count(*) FROM backfills WHERE finished_at IS NOT NULL"))


def _scalar(url: str, query: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text(query)).scalar() or 0)
    except Exception:
        return 0  # not migrated yet
    finally:
        engine.dispose()


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {thread: after.get(thread, 0) - before.get(thread, 0) for thread in after}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stores",
        type=lambda value: value.split(","),
        default=["sqlite", "postgres"],
        help="sqlite,postgres (both)",
    )
    parser.add_argument("--occurrences", type=int, default=200, help="past nights (200)")
    parser.add_argument("--concurrency", type=int, default=4, help="its concurrency (4)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle rate (5)")
    parser.add_argument(
        "--texts", action="store_true", help="also print statements per run by their first words"
    )
    parser.add_argument("--start-timeout", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="for the backfill (300)")
    parser.add_argument(
        "--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    return parser.parse_args()


if __name__ == "__main__":
    main()
