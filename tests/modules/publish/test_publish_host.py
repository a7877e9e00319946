"""The publish module inside the host: retries through a broker outage, ``jobhost trigger`` and
``jobhost validate`` as an operator runs them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from publish_support import (
    NATS_URL,
    RABBITMQ_URL,
    Proxy,
    Stream,
    delivered,
    stored_messages,
    unique,
)
from sqlalchemy import select

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.firing.tick import Ticker
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from tests.commands import jobhost_command
from tests.support import ManualClock, run_log_writer, run_through

DUE = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
MANUAL = Path(__file__).resolve().parents[3] / "docs" / "operations" / "publish.md"


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    """A TCP proxy to NATS, cut (nothing listening on its port) until a test restores it."""
    made = Proxy(("127.0.0.1", 4222))
    yield made
    made.cut()


def test_a_broker_outage_fails_the_attempt_and_the_retry_publishes_with_the_same_key(
    stream: Stream, proxy: Proxy, tmp_path: Path, telemetry: Any
) -> None:
    job = {
        "name": "billing.close-day",
        "cron": "0 1 * * *",
        "broker": "nats",
        "subject": stream.subject,
        "payload": {"kind": "close-day"},
        "timeout": "2s",
        "max_attempts": 2,
        "backoff": "10s",
    }
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/store.db",
        modules={"publish": {"nats_url": proxy.url, "jobs": [job]}},
    )
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "publish"})
    assert catalog.ok, [problem.line() for problem in catalog.problems]
    engine = create_store_engine(settings.database_url)
    clock = ManualClock(DUE - timedelta(minutes=1))
    try:
        upgrade(engine)
        ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="h",
            lease_duration=timedelta(minutes=1),
            telemetry=telemetry[0],
        )
        envelope = RunEnvelope(
            Store(engine, clock),
            host_id="h",
            grace=timedelta(seconds=1),
            telemetry=telemetry[0],
            run_logs=run_log_writer(Store(engine)),
            store_time=clock,
        )
        ticker.sync(clock())
        clock.now = DUE + timedelta(milliseconds=5)
        ((first, spec),) = ticker.tick(clock(), 1).claims
        failed = run_through(envelope, first, spec)

        proxy.restore()
        clock.advance(seconds=11)
        ((retry, spec),) = ticker.tick(clock(), 1).claims
        succeeded = run_through(envelope, retry, spec)

        with reading(engine) as connection:
            query = select(runs).order_by(runs.c.attempt)
            rows = [RunRecord.from_row(r) for r in connection.execute(query).mappings()]
    finally:
        engine.dispose()

    assert (failed.outcome, succeeded.outcome) == ("failed", "succeeded")
    assert (retry.attempt, retry.source) == (2, "retry")
    assert (
        first.idempotency_key == retry.idempotency_key == "billing.close-day:2026-12-01T01:00:00Z"
    )
    assert [(r.attempt, r.outcome) for r in rows] == [(1, "failed"), (2, "succeeded")]
    assert rows[0].error_message is not None
    assert "NATS unavailable: connection refused" in rows[0].error_message
    [message] = stored_messages(stream)
    assert message.headers["Nats-Msg-Id"] == "billing.close-day:2026-12-01T01:00:00Z"
    assert (message.body["attempt"], message.body["occurrence"]) == (2, "2026-12-01T01:00:00Z")


SETTINGS = """\
database_url = "sqlite:///{store}"

[modules.publish]
nats_url = "nats://127.0.0.1:4222"
rabbitmq_url_env = "RABBITMQ_URL"

[[modules.publish.jobs]]
name = "billing.close-day"
cron = "0 2 * * *"
timezone = "Europe/Berlin"
broker = "nats"
subject = "{subject}"
payload = {{ kind = "close-day" }}
headers = {{ "X-Source" = "jobhost" }}
timeout = "10s"

[[modules.publish.jobs]]
name = "billing.close-day-queue"
cron = "0 2 * * *"
broker = "rabbitmq"
exchange = ""
routing_key = "{queue}"
payload = {{ kind = "close-day" }}
"""


def jobhost(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env.update({"JOBHOST_LOAD_PLUGINS": "publish", "RABBITMQ_URL": RABBITMQ_URL})
    return jobhost_command(["--config", str(config), *args], env=env)


def test_jobhost_trigger_puts_one_message_on_each_broker(
    stream: Stream, queue: str, tmp_path: Path
) -> None:
    config = tmp_path / "jobhost.toml"
    store = tmp_path / "store.db"
    config.write_text(SETTINGS.format(store=store, subject=stream.subject, queue=queue))

    # As the manual says: the store is made once (by `db upgrade` or a host), then triggered.
    assert jobhost(config, "db", "upgrade").returncode == 0
    to_nats = jobhost(config, "trigger", "billing.close-day", "--json")
    to_rabbitmq = jobhost(config, "trigger", "billing.close-day-queue", "--json")

    for done in (to_nats, to_rabbitmq):
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["outcome"] == "succeeded"
    nats_run, rabbitmq_run = json.loads(to_nats.stdout), json.loads(to_rabbitmq.stdout)
    # Read by the consumers the manual shows, as they are written there.
    consumers = manual_consumers()
    nats_key, on_nats = asyncio.run(
        consumers["read_one"](NATS_URL, stream.subject, unique("consumer"))
    )
    rabbitmq_key, on_rabbitmq = asyncio.run(consumers["take_one"](RABBITMQ_URL, queue))
    assert on_nats == {
        "kind": "close-day",
        "job": "billing.close-day",
        "occurrence": None,
        "run_id": nats_run["run_id"],
        "attempt": 1,
    }
    assert nats_key == f"billing.close-day:manual:{nats_run['run_id']}"
    assert on_rabbitmq == {
        **on_nats,
        "job": "billing.close-day-queue",
        "run_id": rabbitmq_run["run_id"],
    }
    assert rabbitmq_key == f"billing.close-day-queue:manual:{rabbitmq_run['run_id']}"
    assert stored_messages(stream)[0].headers["X-Source"] == "jobhost"
    assert delivered(queue) == []  # the manual's consumer acknowledged it


def manual_consumers() -> dict[str, Any]:
    """The consumer functions of docs/operations/publish.md, defined from its code blocks."""
    text = MANUAL.read_text(encoding="utf-8")
    namespace: dict[str, Any] = {}
    for block in re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        exec(compile(block, str(MANUAL), "exec"), namespace)
    return namespace


def test_jobhost_validate_lists_every_bad_entry_with_its_fix(tmp_path: Path) -> None:
    config = tmp_path / "jobhost.toml"
    text = SETTINGS.format(store=tmp_path / "store.db", subject="billing.*", queue="commands")
    config.write_text(text.replace('rabbitmq_url_env = "RABBITMQ_URL"\n', ""))

    checked = jobhost(config, "validate")

    assert checked.returncode == 3, checked.stdout + checked.stderr
    shown = checked.stdout + checked.stderr
    assert "[module-settings]: [modules.publish] (in jobhost.toml) 2 problems:" in shown
    assert "fix the plugin" not in shown
    assert "modules.publish.jobs[0] 'billing.close-day': subject = 'billing.*'" in shown
    assert (
        "modules.publish.jobs[1] 'billing.close-day-queue': broker = 'rabbitmq' needs "
        "rabbitmq_url_env = 'RABBITMQ_URL'"
    ) in shown
    assert "Traceback" not in shown
