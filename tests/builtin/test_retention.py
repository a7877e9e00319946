"""``jobhost.run-retention``: old rows go in batches, the newest of every job stay."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from jobhost_contracts import Cancellation, JobContext, TriggerSource
from returns.result import Failure, Success
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from jobhost.builtin.retention import (
    JOB_NAME,
    RetentionSettings,
    RunRetention,
    jobhost_jobs,
)
from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.store import Store, StoreJobState
from jobhost.store.purge import purge
from jobhost.store.schema import hosts, job_idempotency, runs
from tests.support import sample_catalog

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _fill(engine: Engine, job: str, ages_days: list[float], outcome: str = "succeeded") -> None:
    rows = [
        {
            "id": uuid.uuid4().hex,
            "job_name": job,
            "occurrence": NOW - timedelta(days=age),
            "attempt": 1,
            "source": "schedule",
            "outcome": outcome,
            "queued_at": NOW - timedelta(days=age),
        }
        for age in ages_days
    ]
    with engine.begin() as connection:
        connection.execute(runs.insert(), rows)


def _ages(engine: Engine, job: str) -> list[int]:
    with engine.connect() as connection:
        times = connection.execute(
            select(runs.c.queued_at).where(runs.c.job_name == job).order_by(runs.c.queued_at)
        ).scalars()
        return sorted(round((NOW - t).total_seconds() / 86400) for t in times)


def _purge_runs(engine: Engine, *, keep_days: int, **options: Any) -> int:
    return purge(engine, now=NOW, ages={"runs": timedelta(days=keep_days)}, **options)["runs"]


def test_rows_older_than_keep_days_go_except_the_newest_keep_last(engine: Engine) -> None:
    _fill(engine, "a.busy", [1, 5, 31, 40, 50, 60])
    _fill(engine, "a.rare", [100, 200, 300])
    deleted = _purge_runs(engine, keep_days=30, keep_last=2, batch_size=500)
    assert _ages(engine, "a.busy") == [1, 5]
    # A job that runs rarely keeps its newest rows however old they are.
    assert _ages(engine, "a.rare") == [100, 200]
    assert deleted == 5


def test_running_and_pending_rows_are_never_purged(engine: Engine) -> None:
    _fill(engine, "a.job", [90], outcome="running")
    _fill(engine, "a.job", [91], outcome="pending")
    _fill(engine, "a.job", [92])
    assert _purge_runs(engine, keep_days=30, keep_last=0, batch_size=10) == 1
    assert _ages(engine, "a.job") == [90, 91]


def test_a_large_ledger_goes_in_bounded_batches(engine: Engine) -> None:
    _fill(engine, "a.big", [40 + i / 100 for i in range(1200)])
    batches: list[int] = []

    def _stop() -> bool:
        with engine.connect() as connection:
            batches.append(connection.execute(select(func.count()).select_from(runs)).scalar_one())
        return False

    deleted = _purge_runs(engine, keep_days=30, keep_last=50, batch_size=250, should_stop=_stop)
    assert deleted == 1150
    assert batches == [1200, 950, 700, 450, 200, 50]
    assert len(_ages(engine, "a.big")) == 50


def test_cancellation_stops_between_batches(engine: Engine) -> None:
    _fill(engine, "a.big", [40 + i / 100 for i in range(300)])
    calls = iter([False, True])
    deleted = _purge_runs(
        engine, keep_days=30, keep_last=0, batch_size=100, should_stop=lambda: next(calls)
    )
    assert deleted == 100


def test_the_job_is_declared_through_the_hook_with_its_settings() -> None:
    ((declaration, executor),) = jobhost_jobs(MappingProxyType({"jobhost": {"keep_days": 7}}))
    assert declaration.name == JOB_NAME and declaration.module == "jobhost"
    assert isinstance(executor, RunRetention) and executor.config.keep_days == 7
    with pytest.raises(ValueError, match=r"keep_last = -1"):
        jobhost_jobs(MappingProxyType({"jobhost": {"keep_last": -1}}))
    with pytest.raises(ValueError, match=r"keep_dayz"):
        jobhost_jobs(MappingProxyType({"jobhost": {"keep_dayz": 3}}))


def test_a_host_gives_the_retention_job_its_own_store(
    engine: Engine, store_url: str, tmp_path: Path, telemetry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment names another store: the purge follows the host, not the environment.
    elsewhere = tmp_path / "elsewhere.db"
    monkeypatch.delenv("JOBHOST_CONFIG", raising=False)
    monkeypatch.setenv("JOBHOST_DATABASE_URL", f"sqlite:///{elsewhere}")
    settings = Settings(database_url=store_url, plugins=["jobhost.builtin.retention"])
    catalog = sample_catalog(settings)
    executor = catalog.jobs[JOB_NAME].executor
    assert isinstance(executor, RunRetention)
    context = _context(engine)
    unbound = executor.execute(context)
    assert isinstance(unbound, Failure) and "runs only in a jobhost host" in unbound.failure()
    Host(settings, catalog, Store(engine), telemetry=telemetry[0])
    old = datetime.now(UTC) - timedelta(days=90)
    with engine.begin() as connection:
        connection.execute(
            runs.insert(),
            [
                {
                    "id": uuid.uuid4().hex,
                    "job_name": "a.job",
                    "occurrence": old + timedelta(minutes=i),
                    "attempt": 1,
                    "source": "schedule",
                    "outcome": "succeeded",
                    "queued_at": old + timedelta(minutes=i),
                }
                for i in range(60)
            ],
        )
    assert executor.execute(context) == Success(
        {"deleted": 10, "hosts": 0, "idempotency_records": 0}
    )
    assert not elsewhere.exists()


def _context(engine: Engine) -> JobContext:
    return JobContext(
        job_name=JOB_NAME,
        run_id="r",
        occurrence=None,
        attempt=1,
        source=TriggerSource.MANUAL,
        idempotency_key="k",
        fencing_token=1,
        config=MappingProxyType({}),
        logger=logging.getLogger("test"),
        cancellation=Cancellation(),
        state=StoreJobState(engine, JOB_NAME, 1, lambda: datetime.now(UTC)),
    )


def _host(host_id: str, *, seen_days: float, stopped_days: float | None) -> dict[str, object]:
    seen = NOW - timedelta(days=seen_days)
    return {
        "id": host_id,
        "hostname": "box",
        "pid": 1,
        "version": "0.1.0",
        "started_at": seen - timedelta(hours=1),
        "last_seen_at": seen,
        "host_clock_at": seen,
        "heartbeat_seconds": 5,
        "stopped_at": None if stopped_days is None else NOW - timedelta(days=stopped_days),
    }


def _ids(engine: Engine, column: object) -> list[str]:
    with engine.connect() as connection:
        return sorted(connection.execute(select(column)).scalars())  # type: ignore[call-overload]


def test_gone_hosts_and_old_idempotency_records_are_purged(
    engine: Engine,
) -> None:
    with engine.begin() as connection:
        connection.execute(
            hosts.insert(),
            [
                _host("alive", seen_days=0, stopped_days=None),
                _host("stopped-yesterday", seen_days=1, stopped_days=1),
                _host("stopped-long-ago", seen_days=30, stopped_days=30),
                _host("killed-long-ago", seen_days=30, stopped_days=None),
            ],
        )
        connection.execute(
            job_idempotency.insert(),
            [
                {
                    "job_name": "a.job",
                    "key": f"k{age}",
                    "run_id": None,
                    "fencing_token": 1,
                    "recorded_at": NOW - timedelta(days=age),
                }
                for age in (10, 100, 200)
            ],
        )
    config = RetentionSettings(batch_size=1)
    counts = Store(engine).purge(
        now=NOW,
        ages={
            "hosts": timedelta(days=config.keep_hosts_days),
            "idempotency_records": timedelta(days=config.keep_idempotency_days),
        },
        keep_last=config.keep_last,
        batch_size=config.batch_size,
    )
    assert counts == {"hosts": 2, "idempotency_records": 2}
    assert _ids(engine, hosts.c.id) == ["alive", "stopped-yesterday"]
    assert _ids(engine, job_idempotency.c.key) == ["k10"]


def test_the_ages_are_settings_of_the_retention_job() -> None:
    section = {"keep_hosts_days": 1, "keep_requests_days": 2, "keep_idempotency_days": 3}
    ((_, executor),) = jobhost_jobs(MappingProxyType({"jobhost": section}))
    assert isinstance(executor, RunRetention)
    assert (
        executor.config.keep_hosts_days,
        executor.config.keep_requests_days,
        executor.config.keep_idempotency_days,
    ) == (1, 2, 3)
    with pytest.raises(ValueError, match=r"keep_hosts_days = 0: must be a whole number from 1"):
        jobhost_jobs(MappingProxyType({"jobhost": {"keep_hosts_days": 0}}))


def test_a_purged_run_takes_its_log_lines_with_it(engine: Engine) -> None:
    from jobhost.records import LogLine
    from jobhost.store.runlogs import read_lines
    from tests.support import append_lines

    _fill(engine, "a.job", [1, 40, 50])
    with engine.connect() as connection:
        ids = dict(
            connection.execute(
                select(runs.c.queued_at, runs.c.id).where(runs.c.job_name == "a.job")
            ).all()
        )
    lines = [
        LogLine(
            run_id,
            seq,
            int(NOW.timestamp() * 1e6),
            "INFO",
            f"line {seq}",
            offset=(seq - 1) * 6,
            size=6,
        )
        for run_id in ids.values()
        for seq in (1, 2, 3)
    ]
    with engine.begin() as connection:
        append_lines(connection, lines)
    newest = ids[max(ids)]
    assert _purge_runs(engine, keep_days=30, keep_last=0, batch_size=1) == 2
    with engine.connect() as connection:
        kept = {
            run_id: [getattr(entry, "seq", None) for entry in read_lines(connection, run_id)]
            for run_id in ids.values()
        }
    assert kept == {run_id: [1, 2, 3] if run_id == newest else [] for run_id in ids.values()}
