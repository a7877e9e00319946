"""Firing lag and idle wake-ups, side by side with APScheduler: ``python benchmarks/firing.py``.

1. Lag: five every-second jobs for ``SECONDS`` seconds on an SQLite store, measured from the
   ledger (start minus occurrence), beside APScheduler 3's in-memory BackgroundScheduler running
   the same five jobs in the same process run (start minus the second it was due).
2. Idle wake-ups: a host whose only job is nightly, left alone for ``IDLE_SECONDS``; the number
   of loop turns, extrapolated to a day.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.envelope.reporting import configure_telemetry
from jobhost.firing.host import Host
from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.schema import runs

SAMPLE = str(Path(__file__).resolve().parent.parent / "tests" / "plugins" / "sample_jobs.py")
SECONDS = 15
IDLE_SECONDS = 20
JOBS = 5


def main() -> None:
    ours = _jobhost_lags()
    theirs = _apscheduler_lags()
    print(f"firing lag over {SECONDS}s, {JOBS} every-second jobs (milliseconds)")
    print(f"{'':<12} {'runs':>6} {'p50':>8} {'p95':>8} {'max':>8}")
    for name, lags in (("jobhost", ours), ("apscheduler", theirs)):
        print(
            f"{name:<12} {len(lags):>6} {_pct(lags, 50):>8.1f} {_pct(lags, 95):>8.1f} "
            f"{max(lags):>8.1f}"
        )
    print(f"ratio p50 jobhost/apscheduler: {_pct(ours, 50) / _pct(theirs, 50):.2f}")
    turns = _idle_turns()
    print(
        f"idle host, one nightly job: {turns} loop turns in {IDLE_SECONDS}s after start-up; "
        "the default 5m poll cap bounds it at 288 a day"
    )


def _host(directory: Path, jobs: list[dict[str, object]]) -> tuple[Host, Engine]:
    settings = Settings(
        database_url=f"sqlite:///{directory}/store.db",
        plugins=[SAMPLE],
        modules={"sample": {"jobs": jobs}},
        poll_interval="5m",
        log_level="WARNING",
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    return Host(settings, catalog, engine, telemetry=configure_telemetry()), engine


def _jobhost_lags() -> list[float]:
    with tempfile.TemporaryDirectory() as directory:
        jobs = [{"name": f"bench.j{i}", "cron": "* * * * * *"} for i in range(JOBS)]
        host, engine = _host(Path(directory), jobs)
        host.start()
        loop = threading.Thread(target=host.loop, daemon=True)
        loop.start()
        time.sleep(SECONDS)
        host.request_stop()
        loop.join()
        host.shutdown()
        with reading(engine) as connection:
            rows = connection.execute(
                select(runs.c.started_at, runs.c.occurrence).where(runs.c.attempt == 1)
            ).all()
        engine.dispose()
    return [(s - o).total_seconds() * 1000 for s, o in rows if s and o]


def _apscheduler_lags() -> list[float]:
    lags: list[float] = []

    def _job() -> None:
        now = datetime.now(UTC)
        lags.append(now.microsecond / 1000)  # due at the whole second just passed

    scheduler = BackgroundScheduler(timezone="UTC")
    for i in range(JOBS):
        scheduler.add_job(
            _job,
            CronTrigger(second="*", timezone="UTC"),
            id=f"j{i}",
            max_instances=1,
            misfire_grace_time=1,
        )
    scheduler.start()
    time.sleep(SECONDS)
    scheduler.shutdown()
    return lags


def _idle_turns() -> int:
    with tempfile.TemporaryDirectory() as directory:
        host, engine = _host(Path(directory), [{"name": "bench.nightly", "cron": "0 3 * * *"}])
        host.start()
        loop = threading.Thread(target=host.loop, daemon=True)
        loop.start()
        time.sleep(1)
        before = host.status.ticks
        time.sleep(IDLE_SECONDS)
        turns = host.status.ticks - before
        host.request_stop()
        loop.join()
        host.shutdown()
        engine.dispose()
        return turns


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


if __name__ == "__main__":
    main()
