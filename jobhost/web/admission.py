"""Few HTTP requests at once, at a lower priority than the firing loop, their bodies read first.

``jobhost run`` serves the dashboard, the API and ``/report`` in the process that fires the
jobs, and Python runs one thread at a time. :class:`BoundedRequests` lets at most
``http_concurrency`` requests work at once; one more waits up to :data:`QUEUE_WAIT` seconds,
then is answered 503. The probes and ``/metrics`` never wait: a probe or a scrape must not fail
because people are looking at the dashboard. :func:`blocking` runs a request's store work on a
thread of lower scheduling priority (:func:`lower_priority`), so that the operating system runs
the firing loop's threads first.

A request body is refused by its ``Content-Length``, or cut off as soon as more than the bound
has arrived: a 300 MB POST costs the bound, not 300 MB. :class:`BodiesFirst` reads each body
whole, under a deadline of its own, before the request asks for a place: a client that sends
its body a byte at a time holds its connection, never a place.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobhost.web.connections import Refusals
from jobhost.web.middleware import PROBES, json_bytes, send_answer

__all__ = [
    "BODY_TIMEOUT",
    "MAX_FORM",
    "QUEUE_WAIT",
    "BodiesFirst",
    "BodyTooLarge",
    "BoundedRequests",
    "blocking",
    "declared_too_large",
    "lower_priority",
    "read_capped",
]

_log = logging.getLogger("jobhost.http")
_T = TypeVar("_T")
QUEUE_WAIT = 2.0
"""Seconds a request waits for a place before it is answered 503."""
_RETRY_AFTER = 2
_NICE = 10
_lowered = threading.local()


class BoundedRequests:
    """At most ``limit`` requests at work; more wait ``wait`` seconds, then 503."""

    def __init__(self, app: ASGIApp, *, limit: int, wait: float = QUEUE_WAIT) -> None:
        self.app = app
        self.limit = limit
        self.wait = wait
        self._places: anyio.Semaphore | None = None
        self.refused = 0
        """How many requests were answered 503 for want of a place."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBES:
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
        await send_answer(send, 503, json_bytes({"error": busy}), headers)


async def blocking(call: Callable[[], _T], limiter: anyio.CapacityLimiter | None = None) -> _T:
    """Run ``call`` on a worker thread (one of ``limiter``'s, or of the shared pool), at a lower
    priority than the firing loop's; a request timeout abandons it rather than waiting."""

    def lowered() -> _T:
        lower_priority()
        return call()

    return await anyio.to_thread.run_sync(lowered, abandon_on_cancel=True, limiter=limiter)


def lower_priority() -> None:
    """Give the calling thread nice 10, once (Linux: each thread has its own)."""
    if getattr(_lowered, "done", False):
        return
    _lowered.done = True
    # Not Linux, or not allowed: the limit on requests still holds.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)


BODY_TIMEOUT = 10.0
"""The default of ``http_body_timeout``, in seconds."""
MAX_FORM = 16_384
"""The largest form the dashboard reads, in bytes."""

_DIGITS = re.compile(r"[0-9]{1,20}")


class BodyTooLarge(Exception):
    """The body is larger than the limit it was read with (or says it is)."""


def declared_too_large(request: Request, limit: int) -> bool:
    """True when the request's ``Content-Length`` announces more than ``limit`` bytes (or is
    not a number: the server would not frame such a body anyway)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return False
    declared = declared.strip()
    return not _DIGITS.fullmatch(declared) or int(declared) > limit


async def read_capped(request: Request, limit: int) -> bytes:
    """The whole body, at most ``limit`` bytes; :class:`BodyTooLarge` otherwise."""
    if declared_too_large(request, limit):
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise BodyTooLarge
        body.extend(chunk)
    return bytes(body)


class BodiesFirst:
    """ASGI middleware: a request's body read whole within ``seconds`` (else 408) before
    ``app`` sees it; past ``limit``, the rest is left for the application to refuse."""

    def __init__(self, app: ASGIApp, *, limit: int, seconds: float = BODY_TIMEOUT) -> None:
        self.app = app
        self.limit = limit
        self.seconds = seconds
        self._refusals = Refusals()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._wanted(scope):
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
        if late.cancelled_caught:
            self._refusals.refused("body_timeout")
            body = f"the request body did not arrive within {self.seconds:g}s\n".encode()
            headers = {"content-type": "text/plain; charset=utf-8", "connection": "close"}
            await send_answer(send, 408, body, headers)
            return
        await self.app(scope, _replay(read, receive), send)

    def _wanted(self, scope: Scope) -> bool:
        headers = Headers(scope=scope)
        if "transfer-encoding" in headers:
            return True
        declared = headers.get("content-length", "").strip()
        return bool(_DIGITS.fullmatch(declared)) and 0 < int(declared) <= self.limit


def _replay(read: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives the messages already read, then reads on."""
    pending = list(read)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
