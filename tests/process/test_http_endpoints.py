"""The HTTP surface of ``jobhost run``, over real HTTP: probes, Prometheus metrics, the report."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.firing.host import HostStatus
from jobhost.store import Store, create_store_engine, head_revision, upgrade
from jobhost.web import Endpoints, WebServer, create_app, host_endpoints
from tests.cli.operator_support import Operator
from tests.http_get import answers, get
from tests.ports import free_port
from tests.process.conftest import HostProcess
from tests.waiting import wait_for


@pytest.mark.slow
def test_a_running_host_serves_probes_metrics_and_the_report(operator: Operator) -> None:
    port = free_port()
    operator.configure(
        [{"name": "sample.tick", "cron": "* * * * * *"}],
        http_listen=f"127.0.0.1:{port}",
        poll_interval="1s",
        heartbeat_interval="1s",
    )
    base = f"http://127.0.0.1:{port}"
    host = HostProcess(
        "web-1",
        operator.config,
        operator.directory / "web-1.log",
        operator.env(JOBHOST_HOST_ID="web-1"),
    )
    try:
        wait_for(lambda: answers(f"{base}/healthz"), 30, "the HTTP server")
        wait_for(lambda: "turning" in get(f"{base}/healthz")[2], 10, "the first tick")
        status, kind, body = get(f"{base}/healthz")
        assert (status, kind) == (200, "application/json"), body
        assert json.loads(body)["ok"] is True
        status, _, body = get(f"{base}/readyz")
        assert status == 200, body
        assert json.loads(body) == {
            "ok": True,
            "detail": f"store reachable at schema {head_revision()}, 1 jobs",
        }

        metrics = wait_for(
            lambda: _metric_line(base, 'jobhost_runs_total{job="sample.tick"'), 15, "a run metric"
        )
        assert 'outcome="succeeded"' in metrics
        status, kind, text = get(f"{base}/metrics")
        assert status == 200 and kind.startswith("text/plain")
        assert "# TYPE jobhost_run_duration_seconds histogram" in text
        assert "jobhost_run_lag_seconds_count" in text

        status, kind, body = get(f"{base}/report")
        assert (status, kind) == (200, "application/json")
        report = json.loads(body)
        assert [h["id"] for h in report["hosts"]] == ["web-1"]
        (job,) = report["jobs"]
        assert job["name"] == "sample.tick" and job["last_run"]["outcome"] == "succeeded"
        assert "no-live-host" not in " ".join(job["mismatch"])

        status, _, body = get(f"{base}/nope")
        assert status == 404 and "/healthz" in body
    finally:
        host.stop()


def test_probes_fail_with_503_and_a_broken_endpoint_answers_a_bare_500(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    settings = Settings(database_url=url, poll_interval=timedelta(seconds=1))
    status = HostStatus(catalog_ok=True)
    fake: Any = SimpleNamespace(
        settings=settings,
        status=status,
        catalog=Catalog(jobs={}, problems=[]),
        store=Store(engine),
        clock=None,
    )
    endpoints = host_endpoints(fake, lambda: b"")
    broken = Endpoints(endpoints.liveness, endpoints.readiness, endpoints.metrics, _explode)
    server = WebServer(("127.0.0.1", 0), create_app(broken))
    server.start()
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        # Starting: no tick yet, but within three polls plus five seconds of the start.
        assert get(f"{base}/healthz")[0] == 200
        status.last_tick = time.monotonic() - 9
        code, _, body = get(f"{base}/healthz")
        assert code == 503 and "stalled" in json.loads(body)["detail"]
        status.last_tick = time.monotonic()
        assert get(f"{base}/healthz")[0] == 200

        code, _, body = get(f"{base}/readyz")
        assert code == 503 and "not registered" in json.loads(body)["detail"]
        status.synced = True
        code, _, body = get(f"{base}/readyz")
        assert code == 503 and "store schema at None" in json.loads(body)["detail"]
        upgrade(engine)
        assert get(f"{base}/readyz")[0] == 200
        status.catalog_ok = False
        code, _, body = get(f"{base}/readyz")
        assert code == 503 and json.loads(body)["detail"] == "the job catalog is invalid"

        status.catalog_ok = True
        status.stuck = status.stuck_limit
        code, _, body = get(f"{base}/healthz")
        assert code == 503 and "stuck" in json.loads(body)["detail"]

        # A bare 500: the id the log line carries, nothing of the error itself.
        code, _, body = get(f"{base}/report")
        assert code == 500 and "report failed" not in body
        assert json.loads(body)["id"] in json.loads(body)["detail"]
    finally:
        server.stop()
        engine.dispose()


def _explode() -> dict[str, Any]:
    raise RuntimeError("report failed")


def _metric_line(base: str, prefix: str) -> str | None:
    text = get(f"{base}/metrics")[2]
    return next((line for line in text.splitlines() if line.startswith(prefix)), None)


def test_an_ipv6_listen_address_is_served() -> None:
    endpoints = Endpoints(lambda: (True, "turning"), lambda: (True, "ready"), lambda: b"", dict)
    server = WebServer(("::1", 0), create_app(endpoints))
    server.start()
    try:
        with urllib.request.urlopen(f"http://[::1]:{server.address[1]}/healthz", timeout=5) as r:
            assert json.loads(r.read()) == {"ok": True, "detail": "turning"}
    finally:
        server.stop()
