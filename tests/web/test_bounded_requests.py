"""HTTP requests beside a host are bounded: ``http_concurrency`` at work at once, one more is
answered 503 with Retry-After after a short wait, and the probes and /metrics never wait."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from jobhost.config import Settings
from jobhost.web import WebServer, create_app
from jobhost.web.endpoints import Endpoints
from jobhost.web.middleware import blocking
from tests.web.console_support import Client


class Slow:
    """A page that works until the test lets it finish."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    async def page(self, _request: Request) -> Response:
        def work() -> str:
            self.entered.release()
            self.release.wait(30)
            return "done"

        return PlainTextResponse(await blocking(work))


@pytest.fixture
def slow() -> Iterator[Slow]:
    made = Slow()
    yield made
    made.release.set()


def _serve(slow: Slow, limit: int) -> WebServer:
    endpoints = Endpoints(
        liveness=lambda: (True, "turning"),
        readiness=lambda: (True, "ready"),
        metrics=lambda: b"jobhost_up 1\n",
        report=lambda: {},
    )
    app = create_app(
        endpoints, routes=[Route("/slow", slow.page)], concurrency=limit, queue_wait=0.2
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    return server


def test_a_request_beyond_the_limit_is_answered_503_and_the_probes_still_answer(
    slow: Slow,
) -> None:
    server = _serve(slow, limit=2)
    client = Client(f"http://127.0.0.1:{server.address[1]}")
    answers: list[int] = []
    busy = [
        threading.Thread(target=lambda: answers.append(client.get("/slow")[0])) for _ in range(2)
    ]
    try:
        for thread in busy:
            thread.start()
        for _ in busy:
            assert slow.entered.acquire(timeout=30)
        status, headers, body = client.get("/slow")
        assert status == 503
        assert headers["retry-after"] == "2"
        assert "http_concurrency" in json.loads(body)["error"]
        assert client.get("/healthz")[0] == 200
        assert client.get("/readyz")[0] == 200
        assert client.get("/metrics")[2] == "jobhost_up 1\n"
        slow.release.set()
        for thread in busy:
            thread.join(30)
        assert answers == [200, 200]
        status, _, body = client.get("/slow")
        assert (status, body) == (200, "done")
    finally:
        slow.release.set()
        server.stop()


def test_http_concurrency_is_a_small_positive_number(tmp_path: Path) -> None:
    assert Settings(database_url=f"sqlite:///{tmp_path}/s.db").http_concurrency == 4
    for wrong in (0, 65):
        with pytest.raises(ValueError, match="http_concurrency"):
            Settings(database_url=f"sqlite:///{tmp_path}/s.db", http_concurrency=wrong)


def test_a_slow_body_is_read_before_it_takes_a_place_and_is_answered_408_at_its_deadline(
    slow: Slow,
) -> None:
    endpoints = Endpoints(
        liveness=lambda: (True, "turning"),
        readiness=lambda: (True, "ready"),
        metrics=None,
        report=lambda: {},
    )

    async def echo(request: Request) -> Response:
        return PlainTextResponse(await request.body())

    app = create_app(
        endpoints,
        routes=[Route("/slow", slow.page), Route("/echo", echo, methods=["POST"])],
        concurrency=1,
        queue_wait=0.2,
        body_timeout=1.0,
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    port = server.address[1]
    client = Client(f"http://127.0.0.1:{port}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            started = time.monotonic()
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab")
            # The one place is free while the body trickles in.
            slow.release.set()
            status, _, body = client.get("/slow")
            assert (status, body) == (200, "done")
            sock.sendall(b"c")
            answer = b""
            while chunk := sock.recv(65_536):
                answer += chunk
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert answer.endswith(b"the request body did not arrive within 1s\n")
        assert 0.9 < took < 4, took
        # A body that arrives in time is handed on whole.
        posted = urllib.request.Request(client.base + "/echo", b"x" * 10_000, method="POST")
        with urllib.request.urlopen(posted, timeout=10) as response:
            assert (response.status, len(response.read())) == (200, 10_000)
    finally:
        server.stop()
