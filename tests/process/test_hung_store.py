"""A real ``jobhost run`` whose PostgreSQL server hangs behind a live TCP peer.

The host reaches the shared server through a proxy the test owns. Orphaned, the proxy keeps
every open connection open and never passes another byte on it (a backend hung behind a pooler
or a partition: TCP keepalives are answered, nothing else is); hung, it passes no byte on any
connection, new ones included, until restored. With ``store_statement_timeout = "10s"`` every
wait of the host's has a 15 s client-side deadline: the loop drops the orphaned connection and
fires again on a fresh one, SIGTERM ends the process whatever it waits on, and the HTTP answers
that need the store are the problem+json 503 within two seconds.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.firing.host import HostStatus
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import host_endpoints
from tests.http_get import answers, get
from tests.ports import free_port
from tests.process.conftest import HostProcess, ledger
from tests.reliability.proxy import CutProxy
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOBS = [{"name": "sample.every-second", "cron": "* * * * * *"}]


def test_a_host_whose_connections_are_orphaned_drops_them_and_fires_again(
    proxied: tuple[str, CutProxy], postgres_url: str, tmp_path: Path
) -> None:
    url, proxy = proxied
    engine = create_store_engine(postgres_url)  # the test's own look, past the proxy
    host = _start(tmp_path, url)
    try:
        wait_for(lambda: len(ledger(engine)) >= 3, 30, "the host to fire")
        proxy.orphan()
        time.sleep(1)
        proxy.restore()
        restored = datetime.now(UTC)
        again = wait_for(
            lambda: [r for r in ledger(engine) if r.started_at and r.started_at > restored],
            60,
            "the host to fire again on a fresh connection",
        )
        took = (min(r.started_at for r in again if r.started_at) - restored).total_seconds()
        print(f"fired again {took:.1f}s after the orphaning ended")
        host.signal(signal.SIGTERM)
        assert host.wait(40) == 0, host.log()
        log = host.log()
        assert "did not answer within 15s" in log or "store unreachable" in log, log
        assert "store reachable again" in log, log
        assert not [line for line in log.splitlines() if " ERROR " in line], log
        assert "Traceback" not in log, log
    finally:
        host.stop()
        engine.dispose()


@pytest.mark.parametrize(
    ("grace", "within", "exits"),
    [
        ("20s", 35.0, {0, 1}),
        # Shorter than one store deadline (15 s): the stop cannot finish, the process exits anyway.
        ("2s", 12.0, {1}),
    ],
)
def test_sigterm_stops_a_host_whose_store_hangs(
    proxied: tuple[str, CutProxy], tmp_path: Path, grace: str, within: float, exits: set[int]
) -> None:
    url, proxy = proxied
    host = _start(tmp_path, url, shutdown_grace=grace)
    try:
        wait_for(lambda: "host replica-0 started" in host.log(), 30, "the host to start")
        time.sleep(2)  # a few turns and heartbeats
        proxy.hang()
        time.sleep(2)  # the loop and the heartbeat now wait on the store
        signalled = time.monotonic()
        host.signal(signal.SIGTERM)
        code = host.wait(40)
        took = time.monotonic() - signalled
        print(f"shutdown_grace {grace}: stopped {took:.1f}s after SIGTERM, exit {code}")
        assert took < within, host.log()
        assert code in exits, host.log()
        if code == 1:
            # The escape timer fires five seconds past the grace.
            limit = int(grace.removesuffix("s")) + 5
            assert f"shutdown did not finish within {limit}s of the signal" in host.log()
    finally:
        proxy.restore()
        host.stop()


def test_the_http_answers_of_a_hung_store_come_within_two_seconds(
    proxied: tuple[str, CutProxy], tmp_path: Path
) -> None:
    url, proxy = proxied
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    host = _start(tmp_path, url, http_listen=f"127.0.0.1:{port}")
    try:
        wait_for(
            lambda: get(f"{base}/readyz")[0] == 200 if answers(base + "/healthz") else 0,
            30,
            "ready",
        )
        assert get(f"{base}/report")[0] == 200
        assert get(f"{base}/metrics")[0] == 200
        proxy.hang()
        time.sleep(1.5)  # the last look at the store, a second fresh at most, is stale now
        for path in ("/report", "/", "/report"):
            status, kind, body = _timed(f"{base}{path}")
            assert (status, kind) == (503, "application/problem+json"), (path, body)
            assert json.loads(body)["title"] == "Store unavailable"
        status, _, body = _timed(f"{base}/readyz")
        assert status == 503 and "store unreachable" in json.loads(body)["detail"], body
        status, kind, body = _timed(f"{base}/metrics")
        assert status == 200 and "# TYPE" in body, (status, body)
        assert _timed(f"{base}/healthz")[0] == 200
        proxy.restore()
        wait_for(lambda: get(f"{base}/report")[0] == 200, 60, "the report once the store is back")
    finally:
        proxy.restore()
        host.stop()
    assert "Traceback" not in host.log(), host.log()


def test_a_turn_that_outlives_its_deadlines_makes_the_probes_fail(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    status = HostStatus(catalog_ok=True, synced=True, last_tick=time.monotonic())
    status.stall_after, status.hung_after = 15.0, 145.0
    fake: Any = SimpleNamespace(
        settings=Settings(database_url=url, poll_interval=timedelta(seconds=1)),
        status=status,
        catalog=Catalog(jobs={}, problems=[]),
        store=Store(engine),
        clock=None,
    )
    endpoints = host_endpoints(fake, lambda: b"")
    try:
        assert endpoints.readiness()[0] and endpoints.liveness()[0]
        status.turn_started = time.monotonic() - 16
        ready, detail = endpoints.readiness()
        assert not ready and "stalled" in detail and "16s" in detail, detail
        assert endpoints.liveness()[0]
        status.turn_started = time.monotonic() - 146
        alive, detail = endpoints.liveness()
        assert not alive and "hung" in detail and "restart" in detail, detail
        status.turn_started = None
        assert endpoints.readiness()[0] and endpoints.liveness()[0]
    finally:
        engine.dispose()


def _timed(url: str) -> tuple[int, str, str]:
    began = time.monotonic()
    answer = get(url)
    took = time.monotonic() - began
    assert took < 2.0, f"{url} took {took:.2f}s"
    return answer


def _start(directory: Path, url: str, **settings: str) -> HostProcess:
    config = directory / "jobhost.toml"
    lines = [
        f"database_url = {toml_value(url)}",
        f"plugins = {toml_value([SAMPLE_PLUGIN])}",
        'store_statement_timeout = "10s"',
        'store_connect_timeout = "5s"',
        'heartbeat_interval = "2s"',
        'poll_interval = "1s"',
    ]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    lines += ["[modules.sample]", f"log = {toml_value(str(directory / 'runs.log'))}"]
    for job in JOBS:
        lines.append("[[modules.sample.jobs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
    config.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env.update(JOBHOST_LOAD_PLUGINS="", JOBHOST_HOST_ID="replica-0")
    return HostProcess("replica-0", config, directory / "replica-0.log", env)
