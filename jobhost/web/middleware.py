"""The middlewares every answer passes through, and the answers they write themselves.

:class:`SafeAnswers`, the outermost: ``X-Content-Type-Options: nosniff`` on every answer, so no
browser reads JSON or text as HTML, and ``Cache-Control: no-store`` on everything but the
dashboard's static files, so no cache keeps a job's state, a token's answer or an error (a
handler's own value wins). An unexpected exception in any handler is a bare 500 with an id, and
one log line that carries the id; the answer says nothing of the error. The first failure of a
kind (exception type and where it was raised) within a minute is logged with its traceback, the
rest of that minute one line each, so a client repeating a failing request cannot flood the log.

:class:`RequestTimeout`: a bound on how long one request may take.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping

import anyio
from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "PROBES",
    "PROBLEM_JSON",
    "RequestTimeout",
    "SafeAnswers",
    "StartWatch",
    "failure_body",
    "json_bytes",
    "log_unexpected",
    "problem_body",
    "send_answer",
]

_log = logging.getLogger("jobhost.http")
PROBES = ("/healthz", "/readyz", "/metrics")
"""The probes and the scrape: never queued, never refused for a store that is down, and answered
before the API and the dashboard are built."""
PROBLEM_JSON = "application/problem+json"
_QUIET_SECONDS = 60.0
_KEPT_KINDS = 1000
_lock = threading.Lock()
_last_traceback: dict[tuple[str, str], float] = {}


class SafeAnswers:
    """``nosniff`` everywhere, ``no-store`` but on static files, and a 500 for an exception out
    of the application (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cacheable = str(scope.get("path", "")).startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if not cacheable:
                    headers.setdefault("Cache-Control", "no-store")
            await send(message)

        watched = StartWatch(with_headers)
        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            failure_id = log_unexpected(scope.get("method", "?"), scope.get("path", "?"), error)
            if watched.started:
                return  # the answer is under way: it is cut off, and the log says why
            body = json_bytes(failure_body(failure_id))
            await send_answer(with_headers, 500, body, {"content-type": PROBLEM_JSON})


def log_unexpected(method: str, path: str, error: BaseException) -> str:
    """Log ``error`` once under a new id; return the id."""
    failure_id = secrets.token_hex(8)
    kind = (type(error).__qualname__, _origin(error))
    now = time.monotonic()
    with _lock:
        loud = now - _last_traceback.get(kind, -_QUIET_SECONDS) >= _QUIET_SECONDS
        if loud:
            if len(_last_traceback) >= _KEPT_KINDS:
                _last_traceback.clear()
            _last_traceback[kind] = now
    where = f"HTTP {method} {path[:200]} failed (id {failure_id})"
    if loud:
        _log.error("%s", where, exc_info=error)
    else:
        _log.error("%s: %s (traceback logged within the last minute)", where, kind[0])
    return failure_id


def _origin(error: BaseException) -> str:
    """Where ``error`` was raised: its kind is its type and this place, whatever the path."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    if trace is None:
        return "?"
    return f"{trace.tb_frame.f_code.co_filename}:{trace.tb_lineno}"


def problem_body(status: int, title: str, detail: str, **extra: object) -> dict[str, object]:
    """An ``application/problem+json`` body (RFC 9457)."""
    return {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}


def failure_body(failure_id: str) -> dict[str, object]:
    """What a 500 answers: no more than that something failed, and where the log has it."""
    detail = f"an unexpected error; the log has it under id {failure_id}"
    return problem_body(500, "Internal error", detail, id=failure_id)


class RequestTimeout:
    """Answer 504 to a request that has not answered within ``seconds``; one whose answer
    started is cut off. Work on a worker thread is abandoned (threads cannot be stopped)."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watched = StartWatch(send)
        try:
            with anyio.fail_after(self.seconds):
                await self.app(scope, receive, watched)
        except TimeoutError:
            _log.warning("HTTP %s timed out after %gs", scope.get("path"), self.seconds)
            if watched.started:
                return
            body = {"error": f"the request took longer than {self.seconds:g}s"}
            if scope.get("method") not in {"GET", "HEAD", "OPTIONS"}:
                # Its work goes on in a thread that cannot be stopped, and may still commit.
                body["error"] += (
                    "; the change may or may not be made: read the resource (a job's ETag, its "
                    "changes) before retrying"
                )
            await JSONResponse(body, 504)(scope, receive, send)


class StartWatch:
    """A ``send`` that forwards every message and remembers the answer's status once it starts;
    ``on_start`` is told it before the start message leaves (what it logs comes first)."""

    def __init__(self, send: Send, on_start: Callable[[int], None] | None = None) -> None:
        self._send = send
        self._on_start = on_start
        self.status = 0

    @property
    def started(self) -> bool:
        return self.status != 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            if self._on_start is not None:
                self._on_start(self.status)
        await self._send(message)


async def send_answer(send: Send, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    """Write a complete answer: ``headers`` (names lower case), its length, then ``body``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *((name.encode(), value.encode()) for name, value in headers.items()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def json_bytes(body: object) -> bytes:
    """``body`` as the UTF-8 JSON the middlewares answer with."""
    return json.dumps(body).encode()
