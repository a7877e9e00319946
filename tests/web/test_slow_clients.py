"""Slow clients cannot hold the HTTP surface: a request head has a deadline, a body is read
before its request takes a place, connections past the cap take the place of the ones waiting
longest for a head, and none of it writes a log line per connection. Real sockets against the
real server on a loopback port."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from starlette.types import Receive, Scope, Send

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer
from jobhost.web.surfaces import store_application

READER = "reader-secret-0123456789abc"
HEAD_START = b"GET / HTTP/1.1\r\nHost: x\r\n"


@contextmanager
def logged() -> Iterator[list[logging.LogRecord]]:
    """Every record jobhost's HTTP surface and uvicorn write while the block runs."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger("jobhost.http"), logging.getLogger("uvicorn")]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.addHandler(handler)
    loggers[0].setLevel(logging.INFO)
    try:
        yield records
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.removeHandler(handler)
            each.setLevel(level)


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    await asyncio.sleep(float(scope["query_string"] or 0))
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


@contextmanager
def served(**limits: float) -> Iterator[int]:
    server = WebServer(("127.0.0.1", 0), _hello, **limits)  # type: ignore[arg-type]
    server.start()
    try:
        yield server.address[1]
    finally:
        server.stop()


def _read_all(sock: socket.socket) -> bytes:
    answer = bytearray()
    while chunk := sock.recv(65_536):
        answer.extend(chunk)
    return bytes(answer)


def _get(port: int, query: str = "") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET /?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return _read_all(sock)


def test_an_unfinished_head_is_answered_408_and_closed_at_the_deadline() -> None:
    with served(header_timeout=0.5) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            started = time.monotonic()
            sock.sendall(HEAD_START)
            for _ in range(3):  # a line a while, never the end: the deadline still holds
                time.sleep(0.1)
                sock.sendall(b"X-Slow: 1\r\n")
            answer = _read_all(sock)
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert 0.4 < took < 3, took
        # A connection that sends nothing at all is closed as well.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            assert _read_all(sock).startswith(b"HTTP/1.1 408 ")
        assert _get(port).endswith(b"hello")


def test_a_later_head_on_a_kept_connection_has_its_own_deadline() -> None:
    with served(header_timeout=0.5) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(HEAD_START + b"\r\n")
            first = b""
            while not first.endswith(b"hello"):
                first += sock.recv(65_536)
            time.sleep(0.3)  # within keep-alive: a new head starts
            sock.sendall(HEAD_START)
            time.sleep(0.3)
            sock.sendall(b"X-Slow: 1\r\n")  # past the first head's deadline, within its own
            second = _read_all(sock)
        assert second.startswith(b"HTTP/1.1 408 "), second


def test_past_the_cap_the_longest_waiting_connection_makes_room_and_busy_ones_refuse() -> None:
    with logged() as records, served(max_connections=3) as port:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        try:
            # While the idle ones are a moment old, a newcomer is not refused: it waits past the
            # cap, by a bounded few, and is served.
            assert _get(port).endswith(b"hello")
            time.sleep(0.4)
            assert _get(port).endswith(b"hello")  # the oldest idle one made room
            assert _read_all(idle[0]) == b""
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.3)
        busy = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        try:
            for sock in busy:
                sock.sendall(b"GET /?1.5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            time.sleep(0.3)
            answers = [_get(port) for _ in range(5)]
            assert all(answer.startswith(b"HTTP/1.1 503 ") for answer in answers), answers
            assert all(_read_all(sock).endswith(b"hello") for sock in busy)
        finally:
            for sock in busy:
                sock.close()
    lines = [record.getMessage() for record in records]
    # One line a minute at most: the first refusal says it; the rest go to the metric.
    assert len(lines) == 1, lines
    assert "1 evicted" in lines[0]


class Holder:
    """Keeps ``count`` connections with unfinished heads open, as an attacker would: a header
    line every ``every`` seconds, and a closed connection opened again at the next round."""

    def __init__(self, port: int, count: int, every: float) -> None:
        self.port = port
        self.count = count
        self.every = every
        self.closed_by_server = 0
        self.answered_408 = 0
        self.longest_held = 0.0
        self._opened: dict[socket.socket, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.setblocking(False)
        sock.send(HEAD_START)
        self._opened[sock] = time.monotonic()
        return sock

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        held = [self._open() for _ in range(self.count)]
        for sock in held:
            selector.register(sock, selectors.EVENT_READ)
        while not self.stop.is_set():
            deadline = time.monotonic() + self.every
            while (left := deadline - time.monotonic()) > 0 and not self.stop.is_set():
                for key, _ in selector.select(min(left, 0.2)):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65_536)
                    except OSError:
                        data = b""
                    if data.startswith(b"HTTP/1.1 408 "):
                        self.answered_408 += 1
                    self.closed_by_server += 1
                    held_for = time.monotonic() - self._opened.pop(sock)
                    self.longest_held = max(self.longest_held, held_for)
                    selector.unregister(sock)
                    sock.close()
                    held.remove(sock)
            for sock in list(held):
                with suppress(OSError):
                    sock.send(b"X-Slow: 1\r\n")
            while len(held) < self.count and not self.stop.is_set():
                sock = self._open()
                selector.register(sock, selectors.EVENT_READ)
                held.append(sock)
        for sock in held:
            held_for = time.monotonic() - self._opened.pop(sock)
            self.longest_held = max(self.longest_held, held_for)
            sock.close()
        selector.close()


def _trickle(port: int, stop: threading.Event, ends: list[tuple[bytes, float]]) -> None:
    """A sign-in form announced as 10,000 bytes, sent a byte a second; how the server ended it
    (its answer, or the reset of a connection it closed), and after how long."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(
            b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-"
            b"urlencoded\r\nContent-Length: 10000\r\n\r\n"
        )
        sock.settimeout(1)
        answer = b""
        while not stop.is_set():
            try:
                sock.send(b"a")
                answer += sock.recv(65_536)
            except TimeoutError:
                continue
            except OSError as error:
                # This process's threads share one interpreter: one held up past the linger
                # after the answer meets a closed connection instead.
                answer += type(error).__name__.encode()
                break
            if not answer or answer.endswith(b"\n"):
                break
        ends.append((answer, time.monotonic() - started))


def _timed_get(url: str, token: str | None = None) -> tuple[int, float]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    return status, time.monotonic() - started


def test_250_held_heads_and_10_trickling_bodies_leave_probes_pages_and_api_answering(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    settings = Settings(
        database_url=url,
        api_tokens=[
            {
                "name": "reader",
                "sha256": hashlib.sha256(READER.encode()).hexdigest(),
                "scopes": ["read"],
            }
        ],
    )
    engine = create_store_engine(url)
    upgrade(engine)
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    server = WebServer(("127.0.0.1", 0), store_application(settings, catalog, Store(engine)))
    server.start()
    port = server.address[1]
    base = f"http://127.0.0.1:{port}"
    holder = Holder(port, count=250, every=2.0)
    stop = threading.Event()
    bodies: list[tuple[bytes, float]] = []
    trickling = [
        threading.Thread(target=_trickle, args=(port, stop, bodies), daemon=True) for _ in range(10)
    ]
    times: dict[str, list[float]] = {"/healthz": [], "/": [], "/api/v1/jobs": []}
    try:
        with logged() as records:
            holder.thread.start()
            for thread in trickling:
                thread.start()
            time.sleep(1)  # the heads and bodies are held before the first look
            ends = time.monotonic() + 12  # past both deadlines: 5 s heads, 10 s bodies
            while time.monotonic() < ends:
                for path, took_each in times.items():
                    status, took = _timed_get(base + path, READER if "api" in path else None)
                    assert status == 200, (path, status)
                    took_each.append(took)
                time.sleep(0.3)
            stop.set()
            holder.stop.set()
            holder.thread.join(10)
            for thread in trickling:
                thread.join(10)
    finally:
        stop.set()
        holder.stop.set()
        server.stop()
        engine.dispose()
    slowest = {path: max(took) for path, took in times.items()}
    print(f"answers: {len(times['/healthz'])} rounds, slowest {slowest}")
    print(
        f"held heads closed by the server: {holder.closed_by_server} "
        f"({holder.answered_408} answered 408), longest held {holder.longest_held:.1f}s"
    )
    assert all(took < 2 for took in slowest.values()), slowest
    assert holder.answered_408 > 0
    # Every head met its deadline (5 s), give or take the holder's round of 2 s.
    assert holder.longest_held < 5 + 2 + 1, holder.longest_held
    # Each body was cut off at its deadline (10 s), while everything else answered.
    assert len(bodies) == 10, bodies
    for answer, took in bodies:
        assert answer.startswith(b"HTTP/1.1 408 ") or answer == b"ConnectionResetError", answer
        assert 9.5 < took < 13, took
    lines = [record.getMessage() for record in records]
    print("log:", len(records), *lines, sep="\n  ")
    assert len(lines) <= 4, lines
