"""A store that goes away mid-run: the loop keeps turning and the outcome is not lost."""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.firing.host import Host
from jobhost.store import RunRecord, SystemClock, create_store_engine, reading, upgrade
from jobhost.store.operations import request_run
from jobhost.store.schema import runs
from tests.support import SAMPLE_PLUGIN, sample_catalog
from tests.waiting import wait_for


def _settings(tmp_path: Path) -> Settings:
    return Settings(
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


def test_the_loop_survives_the_store_going_away_and_records_the_run_when_it_returns(
    tmp_path: Path, telemetry: object, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), engine, telemetry=telemetry[0])  # type: ignore[index]
    host.start()
    try:
        host._envelope = RunEnvelope(  # short retries: the test waits for them in real time
            engine,
            host_id=host.host_id,
            clock=SystemClock(),
            grace=timedelta(seconds=1),
            telemetry=telemetry[0],
            store_retry=[0.2] * 20,  # type: ignore[index]
        )
        with engine.begin() as connection:
            request_run(connection, "sample.slow", "tester", None, SystemClock()())
        host.turn()
        store = tmp_path / "store.db"
        away = tmp_path / "away"
        away.mkdir()
        with caplog.at_level(logging.WARNING):
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{store}{suffix}").exists():
                    shutil.move(f"{store}{suffix}", away / f"store.db{suffix}")
            engine.dispose()
            assert host.turn() > 0
            assert not host.status.store_ok
            # The run finishes while the store is away, and its recording fails.
            wait_for(
                lambda: any(
                    "finished run(s) failed" in r.getMessage() or "recording run" in r.getMessage()
                    for r in caplog.records
                ),
                10,
                "the finished run's recording to fail",
            )
            for suffix in ("", "-wal", "-shm"):
                if (away / f"store.db{suffix}").exists():
                    Path(f"{store}{suffix}").unlink(missing_ok=True)
                    shutil.move(away / f"store.db{suffix}", f"{store}{suffix}")
            engine.dispose()
            wait_for(host.slots.idle, 10, "the run to be recorded")
        host.turn()
        assert host.status.store_ok
        with reading(engine) as connection:
            (row,) = [RunRecord.from_row(r) for r in connection.execute(select(runs)).mappings()]
        assert row.outcome == "succeeded"
        assert "store unreachable" in caplog.text
    finally:
        host.request_stop()
        host.shutdown()
        engine.dispose()
