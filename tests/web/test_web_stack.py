"""The ASGI stack over real HTTP: HEAD, request timeouts, extra routes, and ``jobhost serve``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from jobhost.web import Endpoints, WebServer, create_app
from tests.cli.operator_support import Operator
from tests.http_get import answers, get
from tests.ports import free_port
from tests.waiting import wait_for


def request(url: str, method: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def _endpoints(report: Any = dict) -> Endpoints:
    return Endpoints(lambda: (True, "turning"), lambda: (True, "ready"), lambda: b"m 1\n", report)


def test_head_answers_like_get_without_a_body() -> None:
    server = WebServer(("127.0.0.1", 0), create_app(_endpoints(lambda: {"jobs": []})))
    server.start()
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        for path in ("/healthz", "/readyz", "/metrics", "/report"):
            got, headers, body = request(base + path, "HEAD")
            assert got == 200, path
            assert body == b""
            assert int(headers["content-length"]) == len(get(base + path)[2].encode())
        assert request(base + "/report", "POST")[0] == 405
    finally:
        server.stop()


def test_a_slow_request_answers_504_and_the_server_goes_on() -> None:
    release = threading.Event()

    def slow_report() -> dict[str, Any]:
        release.wait(10)
        return {}

    server = WebServer(("127.0.0.1", 0), create_app(_endpoints(slow_report), request_timeout=0.5))
    server.start()
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        code, kind, body = get(base + "/report")
        assert (code, kind) == (504, "application/json")
        assert json.loads(body) == {"error": "the request took longer than 0.5s"}
        assert get(base + "/healthz")[0] == 200
    finally:
        release.set()
        server.stop()


def test_extra_routes_and_mounts_are_served_beside_the_endpoints() -> None:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"hello {request.path_params['name']}")

    api = Mount("/api/v1", routes=[Route("/hello/{name}", hello)])
    app = create_app(_endpoints(), routes=[Route("/extra", hello), api])
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        assert get(base + "/api/v1/hello/ops")[2] == "hello ops"
        code, _, body = get(base + "/nope")
        assert code == 404
        assert json.loads(body)["endpoints"] == [
            "/api/v1",
            "/extra",
            "/healthz",
            "/metrics",
            "/readyz",
            "/report",
        ]
    finally:
        server.stop()


def test_an_address_in_use_is_a_configuration_error() -> None:
    from jobhost.errors import ConfigError

    first = WebServer(("127.0.0.1", 0), create_app(_endpoints()))
    try:
        with pytest.raises(ConfigError, match="cannot listen there"):
            WebServer(first.address, create_app(_endpoints()))
    finally:
        first.stop()


@pytest.fixture
def operator(tmp_path: Path) -> Any:
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    yield made
    made.close()


def test_jobhost_serve_reads_the_store_without_a_host(operator: Operator) -> None:
    operator.configure([{"name": "sample.tick", "cron": "0 3 * * *"}])
    operator.sync()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "jobhost", "--config", str(operator.config), "serve"]
    child = subprocess.Popen(
        [*command, "--listen", f"127.0.0.1:{port}"],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: answers(base + "/healthz"), 30, "jobhost serve")
        code, _, body = get(base + "/healthz")
        assert code == 200 and "no host" in json.loads(body)["detail"]
        assert get(base + "/readyz")[0] == 200
        report = json.loads(get(base + "/report")[2])
        assert [job["name"] for job in report["jobs"]] == ["sample.tick"]
        assert report["hosts"] == []
        assert get(base + "/metrics")[0] == 404
        assert operator.live_hosts() == []
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=15)
        assert child.returncode == 0, err
        assert "read-only on http://127.0.0.1:" in err
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def test_jobhost_serve_refuses_a_malformed_address(operator: Operator) -> None:
    operator.configure([{"name": "sample.tick", "cron": "0 3 * * *"}])
    done = operator.jobhost("serve", "--listen", "localhost")
    assert done.returncode == 2
    assert "must be HOST:PORT" in done.stderr
