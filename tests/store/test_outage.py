"""A store that goes away mid-run: the loop keeps turning and the outcome is not lost."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine, make_url

from jobhost.clock import SystemClock
from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.backfills import create_backfill
from jobhost.store.schema import runs
from tests.reliability.proxy import CutProxy
from tests.support import SAMPLE_PLUGIN, sample_catalog
from tests.waiting import wait_for

NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *"}


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
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])  # type: ignore[index]
    host.start()
    try:
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
                lambda: any("finished run(s) failed" in r.getMessage() for r in caplog.records),
                10,
                "the finished run's recording to fail",
            )
            for suffix in ("", "-wal", "-shm"):
                if (away / f"store.db{suffix}").exists():
                    Path(f"{store}{suffix}").unlink(missing_ok=True)
                    shutil.move(away / f"store.db{suffix}", f"{store}{suffix}")
            engine.dispose()
            wait_for(lambda: not host.slots.runs(), 10, "the run to be recorded")
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


@pytest.mark.postgres
def test_a_store_lost_as_a_backfill_is_claimed_is_said_once_and_the_backfill_goes_on(
    postgres_url: str, tmp_path: Path, telemetry: object, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_url(postgres_url)
    with CutProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        settings, engine = _through(proxy, postgres_url, tmp_path)
        night = datetime(2026, 4, 1, 3, tzinfo=UTC)
        with engine.begin() as connection:
            create_backfill(
                connection,
                job="sample.nightly",
                start=night,
                end=night + timedelta(hours=1),
                mode="missing",
                reason="outage",
                actor="ops",
                concurrency=1,
                occurrences=[night],
                now=SystemClock()(),
            )
        host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])  # type: ignore[index]
        tick = host._ticker.tick
        turns: list[int] = []

        def cut_second(*args: Any, **kwargs: Any) -> Any:
            # The first turn reads that a backfill runs; the store goes away as the second
            # would claim its occurrence.
            turns.append(1)
            if len(turns) == 2 and not proxy.cuts:
                proxy.cut()
            return tick(*args, **kwargs)

        host._ticker.tick = cut_second  # type: ignore[method-assign]
        host.start()
        try:
            with caplog.at_level(logging.INFO, logger="jobhost"):
                wait_for(lambda: host.turn() is not None and proxy.cuts, 10, "the backfill claim")
                assert not host.status.store_ok
                host.turn()  # the next turn meets the outage too, and says nothing more
                said = [
                    r.getMessage()
                    for r in caplog.records
                    if r.name == "jobhost.host" and r.levelno >= logging.WARNING
                ]
                # Said once, as the store's going away, and never "reachable again" while it
                # is away.
                assert len(said) == 1 and said[0].startswith("store unreachable"), said
                assert "store reachable again" not in caplog.text
                proxy.restore()

                def backfilled() -> list[RunRecord]:
                    host.turn()
                    with reading(engine) as connection:
                        query = select(runs).where(runs.c.backfill_id.is_not(None))
                        rows = [RunRecord.from_row(r) for r in connection.execute(query).mappings()]
                    return [r for r in rows if r.outcome == "succeeded"]

                (run,) = wait_for(backfilled, 20, "the backfilled night to run once it is back")
                assert run.occurrence == night
                assert host.status.store_ok
                assert "store reachable again" in caplog.text
        finally:
            proxy.restore()
            host.request_stop()
            host.shutdown()
            engine.dispose()


@pytest.mark.postgres
def test_an_outage_is_said_when_it_begins_and_again_once_a_minute_not_at_every_retry(
    postgres_url: str, tmp_path: Path, telemetry: object, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_url(postgres_url)
    with CutProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        settings, engine = _through(proxy, postgres_url, tmp_path)
        host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])  # type: ignore[index]
        host.start()
        try:
            proxy.cut()
            with caplog.at_level(logging.WARNING, logger="jobhost.host"):
                for _ in range(5):
                    host.turn()

                def said() -> list[str]:
                    return [r.getMessage() for r in caplog.records if r.name == "jobhost.host"]

                assert len(said()) == 1 and said()[0].startswith("store unreachable"), said()
                host._down_since -= 61  # a minute on
                host._down_said -= 61
                host.turn()
                host.turn()
                assert len(said()) == 2, said()
                assert said()[1].startswith("store still unreachable after 6"), said()
            proxy.restore()
            wait_for(lambda: host.turn() is not None and host.status.store_ok, 20, "the store")
        finally:
            proxy.restore()
            host.request_stop()
            host.shutdown()
            engine.dispose()


def _through(proxy: CutProxy, postgres_url: str, tmp_path: Path) -> tuple[Settings, Engine]:
    """Settings and a migrated engine of a nightly job's store, reached through ``proxy``."""
    through = make_url(postgres_url).set(host="127.0.0.1", port=proxy.port)
    settings = Settings(
        database_url=through.render_as_string(hide_password=False),
        plugins=[SAMPLE_PLUGIN],
        modules={"sample": {"log": str(tmp_path / "runs.log"), "jobs": [NIGHTLY]}},
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    return settings, engine
