"""A run's times are its executor's own: not the claim transaction's, not the outcome write's.

Runs claimed in one transaction and recorded in one batch each keep their own start and end,
which bracket the executor's work; a run that finished while the store was away keeps its real
end, not the moment the store came back.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs
from tests.support import SAMPLE_PLUGIN, sample_catalog
from tests.waiting import wait_for

SLEEPS = [0.05, 0.15, 0.25, 0.35]


def _finished_runs(engine: Any) -> list[RunRecord]:
    with reading(engine) as connection:
        rows = connection.execute(select(runs).where(runs.c.attempt >= 1)).mappings()
        return [RunRecord.from_row(r) for r in rows if r["outcome"] not in {"running", "pending"}]


def _wait_idle(host: Host, engine: Any, count: int, timeout: float) -> list[RunRecord]:

    def recorded() -> list[RunRecord] | None:
        done = _finished_runs(engine) if not host.slots.runs() else []
        return done if len(done) >= count else None

    found: list[RunRecord] = wait_for(recorded, timeout, f"{count} runs recorded", every=0.05)
    return found


def test_runs_of_one_claim_keep_their_own_times_bracketing_their_work(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    jobs = [
        {"name": f"sample.sleep-{i}", "cron": "* * * * * *", "behaviour": "sleep", "seconds": s}
        for i, s in enumerate(SLEEPS)
    ]
    settings = sample_settings(jobs, worker_pool_size=8)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    try:
        # One turn just after a second begins: every job is due, all claimed in one go.
        time.sleep(1.05 - datetime.now(UTC).microsecond / 1e6)  # waits on the clock itself
        before = datetime.now(UTC)
        host.turn()
        rows = _wait_idle(host, engine, len(SLEEPS), 20)
        after = datetime.now(UTC)
    finally:
        host.request_stop()
        host.shutdown()
        engine.dispose()
    by_job = {r.job_name: r for r in rows if r.attempt == 1}
    assert len(by_job) == len(SLEEPS)
    starts = [r.started_at for r in by_job.values()]
    ends = [r.finished_at for r in by_job.values()]
    assert len(set(starts)) == len(SLEEPS), starts
    assert len(set(ends)) == len(SLEEPS), ends
    for index, seconds in enumerate(SLEEPS):
        run = by_job[f"sample.sleep-{index}"]
        assert run.started_at is not None and run.finished_at is not None
        assert before - timedelta(seconds=1) <= run.started_at <= run.finished_at <= after
        took = (run.finished_at - run.started_at).total_seconds()
        assert seconds <= took < seconds + 0.1, (run.job_name, took)


def test_a_run_finished_during_an_outage_keeps_its_real_end(tmp_path: Path, telemetry: Any) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/store.db",
        plugins=[SAMPLE_PLUGIN],
        modules={
            "sample": {
                "jobs": [
                    {"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 1}
                ]
            }
        },
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    store = tmp_path / "store.db"
    away = tmp_path / "away"
    away.mkdir()
    try:
        with engine.begin() as connection:
            request_run(connection, "sample.slow", "tester", None, datetime.now(UTC))
        host.turn()
        began = datetime.now(UTC)
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{store}{suffix}").exists():
                shutil.move(f"{store}{suffix}", away / f"store.db{suffix}")
        engine.dispose()
        time.sleep(3.5)  # the run ends after 1 s; the store stays away 2.5 s longer
        for suffix in ("", "-wal", "-shm"):
            if (away / f"store.db{suffix}").exists():
                Path(f"{store}{suffix}").unlink(missing_ok=True)
                shutil.move(away / f"store.db{suffix}", f"{store}{suffix}")
        engine.dispose()
        (run,) = _wait_idle(host, engine, 1, 30)
    finally:
        host.request_stop()
        host.shutdown()
        engine.dispose()
    assert run.outcome == "succeeded"
    assert run.started_at is not None and run.finished_at is not None
    took = (run.finished_at - run.started_at).total_seconds()
    assert 1.0 <= took < 1.5, took
    assert run.finished_at < began + timedelta(seconds=2)
