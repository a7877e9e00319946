"""A real HTTP server on 127.0.0.1 in a thread, and a context to run calls in."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jobhost_contracts import Cancellation, JobContext, TriggerSource

OCCURRENCE = datetime(2026, 11, 30, 3, 17, tzinfo=UTC)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    base: str
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def occurrence_key(job: str, occurrence: datetime) -> str:
    """The host's key for an occurrence (``jobhost.firing.tick.occurrence_key``)."""
    return f"{job}:{occurrence.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def make_context(job: str, *, attempt: int = 1, occurrence: datetime = OCCURRENCE) -> JobContext:
    return JobContext(
        job_name=job,
        run_id=f"run-{attempt}",
        occurrence=occurrence,
        attempt=attempt,
        source=TriggerSource.SCHEDULE if attempt == 1 else TriggerSource.RETRY,
        idempotency_key=occurrence_key(job, occurrence),
        fencing_token=attempt,
        config={},
        logger=logging.getLogger(f"jobhost.job.{job}"),
        cancellation=Cancellation(),
        state=_NoState(),
    )


@contextmanager
def serve() -> Iterator[Server]:
    """Paths: /ok 200, /created 201, /missing 404, /fail 500 with a long body, /echo 500
    echoing the request headers, /slow waits for ``release``, /moved 302 to /ok."""
    server_box: list[Server] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state = server_box[0]
            state.received.append(
                Received(self.command, self.path, dict(self.headers.items()), body)
            )
            if self.path == "/slow":
                state.release.wait(10)
                self._send(200, b"late")
            elif self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "/ok")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/echo":
                self._send(500, json.dumps(dict(self.headers.items())).encode())
            else:
                status = {"/ok": 200, "/created": 201, "/missing": 404}.get(self.path, 500)
                self._send(status, b"boom! " + b"x" * 500 if status == 500 else b"fine")

        def _send(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}")
    server_box.append(server)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class _NoState:
    """Calls keep no state: any use of it is a bug in the executor."""

    def get(self, key: str) -> str | None:
        raise AssertionError("an HTTP call does not read job state")

    def set(self, key: str, value: str) -> None:
        raise AssertionError("an HTTP call does not write job state")

    def record(self, idempotency_key: str) -> bool:
        raise AssertionError("an HTTP call does not record work")

    def seen(self, idempotency_key: str) -> bool:
        raise AssertionError("an HTTP call does not read recorded work")
