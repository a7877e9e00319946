"""The middlewares every answer passes through, and the answers they write themselves.

``nosniff`` on every answer, so no browser reads JSON or text as HTML; ``no-store`` on all but
static files, so no cache keeps a job's state or a token's answer. An unexpected exception is a
bare 500 with an id one log line carries, with its traceback once a minute per kind (type and
place raised), so a client repeating a failing request cannot flood the log.

``jobhost run`` serves in the process that fires the jobs, and Python runs one thread at a
time: :class:`BoundedRequests` lets few requests work at once (never holding back the probes
and ``/metrics``), and :func:`blocking` runs their store work on threads of lower priority, so
the operating system runs the firing loop first. :class:`BodiesFirst` reads each body before
the request asks for a place: a client sending a byte at a time holds its connection, never a
place, and a 300 MB POST costs the bound, not 300 MB.

NUL in a path or a query (``%00``) is answered 400 before any handler runs, as PostgreSQL
refuses NUL in text; parsed JSON bodies are checked by :func:`json_problem`. Every scope is
HTTP: the server (:mod:`jobhost.web.server`) runs with no lifespan and no WebSocket.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import parse_qsl, unquote

import anyio
from jobhost_contracts import redact_text
from opentelemetry import metrics
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobhost.runtime.definition import FieldProblem
from jobhost.store.engine import is_store_down

__all__ = [
    "MAX_FORM",
    "MAX_JSON_DEPTH",
    "NO_NUL_PATTERN",
    "PROBES",
    "PROBLEM_JSON",
    "QUEUE_WAIT",
    "BodiesFirst",
    "BodyTooLarge",
    "BoundedRequests",
    "Refusals",
    "RefuseNul",
    "RequestTimeout",
    "SafeAnswers",
    "StoreUnavailable",
    "blocking",
    "declared_too_large",
    "failure_body",
    "json_problem",
    "log_unexpected",
    "loggable",
    "lower_priority",
    "problem_body",
    "read_capped",
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
    """The outermost middleware (see the module); a handler's own cache header wins."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cacheable = str(scope.get("path", "")).startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if not cacheable:
                    headers.setdefault("Cache-Control", "no-store")
            await send(message)

        watched = _StartWatch(with_headers)
        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            failure_id = log_unexpected(scope.get("method", "?"), scope.get("path", "?"), error)
            if watched.started:
                return  # the answer is under way: it is cut off, and the log says why
            body = _json_bytes(failure_body(failure_id))
            await Response(body, 500, {"content-type": PROBLEM_JSON})(scope, receive, with_headers)


_UNLOGGABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def loggable(text: str, limit: int = 200) -> str:
    """A client's text cut to ``limit``, control characters escaped: a decoded ``%0a`` must not
    forge a log line, nor ``%1b`` colour the terminal showing the log."""
    return _UNLOGGABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text[:limit])


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
    where = f"HTTP {method} {loggable(path)} failed (id {failure_id})"
    if loud:
        _log.error("%s", where, exc_info=error)
    else:
        _log.error("%s: %s (traceback logged within the last minute)", where, kind[0])
    return failure_id


def _origin(error: BaseException) -> str:
    """Where ``error`` was raised: its kind is its type and this place, whatever the path."""
    last = traceback.extract_tb(error.__traceback__, limit=-1)
    return f"{last[0].filename}:{last[0].lineno}" if last else "?"


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
        watched = _StartWatch(send)
        try:
            with anyio.fail_after(self.seconds):
                await self.app(scope, receive, watched)
        except TimeoutError:
            path = loggable(str(scope.get("path", "?")))
            _log.warning("HTTP %s timed out after %gs", path, self.seconds)
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


class _StartWatch:
    """A ``send`` that notes the answer's start; ``on_start`` hears its status before it leaves."""

    def __init__(self, send: Send, on_start: Callable[[int], None] | None = None) -> None:
        self._send = send
        self._on_start = on_start
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if self._on_start is not None:
                self._on_start(int(message["status"]))
        await self._send(message)


def _json_bytes(body: object) -> bytes:
    return json.dumps(body).encode()


_T = TypeVar("_T")
QUEUE_WAIT = 2.0
"""Seconds a request waits for a place before it is answered 503."""
_RETRY_AFTER = 2
_NICE = 10
_lowered = threading.local()


class BoundedRequests:
    """At most ``limit`` (``http_concurrency``) requests at work; more wait ``wait`` seconds,
    then 503."""

    def __init__(self, app: ASGIApp, *, limit: int, wait: float = QUEUE_WAIT) -> None:
        self.app = app
        self.limit = limit
        self.wait = wait
        self._places: anyio.Semaphore | None = None
        self.refused = 0
        """How many requests were answered 503 for want of a place."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        if self._places is None:  # made on the server's event loop, at its first request
            self._places = anyio.Semaphore(self.limit)
        places = self._places
        with anyio.move_on_after(self.wait) as waited:  # bounds the wait for a place, not the work
            await places.acquire()
        if not waited.cancelled_caught:
            try:
                await self.app(scope, receive, send)
            finally:
                places.release()
            return
        self.refused += 1
        if self.refused == 1 or self.refused % 100 == 0:
            _log.warning(
                "HTTP: %d requests at work (http_concurrency); answered 503 to %d so far",
                self.limit,
                self.refused,
            )
        busy = f"busy: {self.limit} requests are at work (http_concurrency); try again shortly"
        headers = {
            "content-type": "application/json",
            "retry-after": str(_RETRY_AFTER),
            "cache-control": "no-store",
        }
        await Response(_json_bytes({"error": busy}), 503, headers)(scope, receive, send)


async def blocking(call: Callable[[], _T], limiter: anyio.CapacityLimiter | None = None) -> _T:
    """Run ``call`` on a worker thread (one of ``limiter``'s, or of the shared pool), at a lower
    priority than the firing loop's; a request timeout abandons it rather than waiting."""

    def lowered() -> _T:
        lower_priority()
        return call()

    return await anyio.to_thread.run_sync(lowered, abandon_on_cancel=True, limiter=limiter)


def lower_priority() -> None:
    """Nice 10 for the calling thread, once (on Linux each thread has its own)."""
    if getattr(_lowered, "done", False):
        return
    _lowered.done = True
    # Not Linux, or not allowed: the limit on requests still holds.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)


MAX_FORM = 16_384
"""The largest form the dashboard reads, in bytes."""

_DIGITS = re.compile(r"[0-9]{1,20}")


class BodyTooLarge(Exception):
    pass


def declared_too_large(request: Request, limit: int) -> bool:
    """A ``Content-Length`` past ``limit``, or not a number (no server would frame the body)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return False
    declared = declared.strip()
    return not _DIGITS.fullmatch(declared) or int(declared) > limit


async def read_capped(request: Request, limit: int) -> bytes:
    if declared_too_large(request, limit):
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise BodyTooLarge
        body.extend(chunk)
    return bytes(body)


class BodiesFirst:
    """A request's body read whole within ``seconds`` (else 408) before ``app`` sees it; past
    ``limit``, the rest is left for the application to refuse."""

    def __init__(self, app: ASGIApp, *, limit: int, seconds: float) -> None:
        self.app = app
        self.limit = limit
        self.seconds = seconds
        self._refusals = Refusals()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._wanted(scope):
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        size = 0
        with anyio.move_on_after(self.seconds) as late:
            while True:
                message = await receive()
                read.append(message)
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if not message.get("more_body", False) or size > self.limit:
                    break
        if read and read[-1]["type"] == "http.disconnect":
            return  # the client left before its body was whole: no one to answer, nothing wrong
        if late.cancelled_caught:
            self._refusals.refused("body_timeout")
            body = f"the request body did not arrive within {self.seconds:g}s\n".encode()
            headers = {"content-type": "text/plain; charset=utf-8", "connection": "close"}
            await Response(body, 408, headers)(scope, receive, send)
            return
        await self.app(scope, _replay(read, receive), send)

    def _wanted(self, scope: Scope) -> bool:
        headers = Headers(scope=scope)
        if "transfer-encoding" in headers:
            return True
        declared = headers.get("content-length", "").strip()
        return bool(_DIGITS.fullmatch(declared)) and 0 < int(declared) <= self.limit


LOG_EVERY_SECONDS = 60.0


class Refusals:
    """Connections closed before their request was read: a metric, and a line of the counts by
    reason at most every :data:`LOG_EVERY_SECONDS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._last: float | None = None
        self._counter = metrics.get_meter("jobhost").create_counter(
            "jobhost.http.connections_refused",
            unit="{connection}",
            description="HTTP connections closed before their request was read, by reason",
        )

    def refused(self, reason: str) -> None:
        """One connection closed for ``reason`` (head_timeout, evicted, over_capacity, ...)."""
        self._counter.add(1, {"reason": reason})
        now = time.monotonic()
        with self._lock:
            self._pending[reason] += 1
            if self._last is not None and now - self._last < LOG_EVERY_SECONDS:
                return
            self._last = now
            said = ", ".join(f"{n} {why}" for why, n in sorted(self._pending.items()))
            self._pending.clear()
        _log.warning(
            "HTTP: connections closed before their request was read (%s); the next such line "
            "comes in %gs at the earliest (metric jobhost.http.connections_refused)",
            said,
            LOG_EVERY_SECONDS,
        )


def _replay(read: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    async def replayed() -> Message:
        return read.pop(0) if read else await receive()

    return replayed


_RETRY_AFTER_SECONDS = 5
"""What ``Retry-After`` says: about how long a store outage takes to notice it is over."""
_SUSPECT_AFTER = 0.5
_ANSWER_WITHIN = 1.0
_LOOK_EVERY = 1.0

_down_lock = threading.Lock()
_down = False
# Requests that never read the store cannot tell that it is back.
_STORELESS = (*PROBES, "/static/")


def _unavailable(method: str, path: str, error: BaseException) -> Response:
    global _down
    with _down_lock:
        first, _down = not _down, True
    if first:
        line = str(error).splitlines()[0] if str(error) else ""
        _log.warning(
            "HTTP %s %s: the store is unavailable (%s: %s); answering 503 until it returns",
            method,
            loggable(path),
            type(error).__name__,
            redact_text(line)[:300],
        )
    if method in {"GET", "HEAD", "OPTIONS"}:
        detail = f"the store is unavailable, retry in {_RETRY_AFTER_SECONDS}s"
    else:
        # The connection may have gone while the commit was under way: say so, never guess.
        detail = (
            f"the store is unavailable, retry in {_RETRY_AFTER_SECONDS}s; the change may or may "
            "not have been made: read the resource (a job's ETag, its changes) before retrying"
        )
    body = problem_body(503, "Store unavailable", detail)
    headers = {"content-type": PROBLEM_JSON, "retry-after": str(_RETRY_AFTER_SECONDS)}
    return Response(json.dumps(body, indent=2).encode(), 503, headers)


def _store_answered(path: str) -> None:
    global _down
    if not _down or path.startswith(_STORELESS):
        return
    with _down_lock:
        was, _down = _down, False
    if was:
        _log.info("HTTP %s: the store answers again", loggable(path))


class StoreUnavailable:
    """A store error out of the application answers 503 at once. A request still at work after
    half a second has the store looked at (``answers(within)``: a trivial read, shared by every
    request, about once a second); one not answered within a second has the request abandoned
    and answered the same 503. The answer names nothing of the error; the log has one warning
    when an outage starts and one line when a request reads the store again."""

    def __init__(self, app: ASGIApp, answers: Callable[[float], bool] | None = None) -> None:
        self.app = app
        self.answers = answers
        self._looks: anyio.CapacityLimiter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "?"))

        def started(status: int) -> None:
            # Said before the answer leaves, so whoever reads the answer can read the line.
            if status < 500:
                _store_answered(path)

        watched = _StartWatch(send, started)
        cause: BaseException
        try:
            if self.answers is None or path.startswith(_STORELESS):
                await self.app(scope, receive, watched)
                return
            if not await self._abandoned(scope, receive, watched) or watched.started:
                return
            cause = TimeoutError(f"no answer to a trivial read within {_ANSWER_WITHIN:g}s")
        except Exception as error:
            if not is_store_down(error) or watched.started:
                raise
            cause = error
        await _unavailable(str(scope.get("method", "?")), path, cause)(scope, receive, send)

    async def _abandoned(self, scope: Scope, receive: Receive, watched: _StartWatch) -> bool:
        """Whether the request was abandoned to a hung store."""
        failed: list[Exception] = []
        hung = False

        if self._looks is None:  # made on the server's event loop; never behind stuck requests
            self._looks = anyio.CapacityLimiter(2)
        looks, answers = self._looks, self.answers
        assert answers is not None

        async def watch() -> None:
            nonlocal hung
            await anyio.sleep(_SUSPECT_AFTER)
            while not watched.started:
                if not await anyio.to_thread.run_sync(
                    answers, _ANSWER_WITHIN, abandon_on_cancel=True, limiter=looks
                ):
                    hung = True
                    group.cancel_scope.cancel()
                    return
                await anyio.sleep(_LOOK_EVERY)

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            # The request runs in this task, at once: a task of its own would start a turn of
            # the event loop later, after the server may have seen its client hang up.
            try:
                await self.app(scope, receive, watched)
            except Exception as error:  # raised outside the group, unwrapped
                failed.append(error)
            group.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return hung


MAX_JSON_DEPTH = 32
NO_NUL_PATTERN = "^[^\\x00]*$"
"""The API document's pattern of a text that may hold anything but NUL."""
_NUL = "\x00"
# JSON can carry a lone surrogate (``"\ud800"``) that no UTF-8 text holds: the database
# driver and the answer's encoder would fail on it with a 500.
_SURROGATE = re.compile("[\ud800-\udfff]")
_NO_SURROGATE = "must not contain a lone surrogate (\\ud800-\\udfff): send text as UTF-8"


class RefuseNul:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = _nul_problem(scope)
        if problem is not None:
            errors = [{"field": problem.field, "message": problem.message}]
            body = problem_body(400, "Invalid request", problem.line(), errors=errors)
            answer = Response(_json_bytes(body), 400, {"content-type": PROBLEM_JSON})
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _nul_problem(scope: Scope) -> FieldProblem | None:
    message = "must not contain a NUL character (%00)"
    path = str(scope.get("path", ""))
    raw = scope.get("raw_path")
    if _NUL in path or (isinstance(raw, bytes) and _NUL in unquote(raw.decode("latin-1"))):
        return FieldProblem("path", message)
    query = scope.get("query_string", b"")
    text = query.decode("latin-1") if isinstance(query, bytes) else ""
    for name, value in parse_qsl(text, keep_blank_values=True):
        if _NUL in name or _NUL in value:
            return FieldProblem(name.replace(_NUL, "\\0")[:60] or "query", message)
    return None


def json_problem(value: object) -> FieldProblem | None:
    """The first place of a parsed JSON body that the store cannot hold: a string or a key with
    NUL or a lone surrogate, or nesting deeper than :data:`MAX_JSON_DEPTH`."""
    pending: list[tuple[object, str, int]] = [(value, "", 0)]
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, str):
            if _NUL in item:
                return FieldProblem(where, "must not contain a NUL character (\\u0000)")
            if _SURROGATE.search(item) is not None:
                return FieldProblem(where, _NO_SURROGATE)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            return FieldProblem(where, f"is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                field = f"{where}.{key}" if where else str(key)
                if _NUL in key:
                    return FieldProblem(field.replace(_NUL, "\\0"), "a key must not contain NUL")
                if _SURROGATE.search(key) is not None:
                    return FieldProblem(_SURROGATE.sub("?", field), _NO_SURROGATE)
                pending.append((inner, field, depth + 1))
        else:
            pending.extend((inner, f"{where}[{i}]", depth + 1) for i, inner in enumerate(item))
    return None
