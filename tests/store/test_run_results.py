"""A run's Success value reaches the ledger row, history and the audit line; a failed attempt
keeps none. Migration 0016 adds the column and takes it away again. On both stores."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib.resources import files

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import inspect, select

from jobhost.operations.runs import history_json
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from jobhost.store.snapshot import JobRead
from tests.store.conftest import Replica
from tests.support import ManualClock

JOB = "sample.twice"


def test_the_success_value_is_kept_shown_and_audited(
    replicas: Callable[..., list[Replica]],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobhost.audit")
    job = {"name": JOB, "cron": "* * * * *", "behaviour": "fail-once", "max_attempts": 2}
    job |= {"backoff": "1s", "jitter": 0}
    (replica,) = replicas([job])
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    assert [replica.finish(c) for c in replica.tick()] == ["failed"]
    clock.now += timedelta(seconds=3)
    assert [replica.finish(c) for c in replica.tick()] == ["succeeded"]

    with reading(replica.engine) as connection:
        stored = connection.execute(
            select(runs.c.attempt, runs.c.result).order_by(runs.c.attempt)
        ).all()
    assert [tuple(row) for row in stored] == [(1, None), (2, '"second attempt worked"')]
    history = history_json(JOB, Store(replica.engine).job_page(JobRead(JOB, history=20)).history)
    assert [r["result"] for r in history["runs"]] == ["second attempt worked", None]
    audits = [json.loads(r.getMessage()) for r in caplog.records if r.name == "jobhost.audit"]
    assert [a.get("result") for a in audits] == [None, "second attempt worked"]


def test_migration_0016_adds_and_drops_the_result_column(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        upgrade(engine)
        assert "result" in {c["name"] for c in inspect(engine).get_columns("runs")}
        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0015")
        assert "result" not in {c["name"] for c in inspect(engine).get_columns("runs")}
        upgrade(engine)
        assert "result" in {c["name"] for c in inspect(engine).get_columns("runs")}
    finally:
        engine.dispose()
