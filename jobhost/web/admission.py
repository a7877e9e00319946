"""Few HTTP requests at once, at a lower priority than the firing loop.

``jobhost run`` serves the dashboard, the API and ``/report`` in the process that fires the
jobs. Python runs one thread at a time, so every request rendering a page takes its turn from
the firing loop. :class:`BoundedRequests` lets at most ``http_concurrency`` requests work at
once; one more waits up to :data:`QUEUE_WAIT` seconds for a place, then is answered ``503`` with
``Retry-After``. The probes and ``/metrics`` never wait: a Kubernetes probe or a scrape must not
fail because people are looking at the dashboard. :func:`lower_priority` gives the thread it is
called on a lower scheduling priority (nice 10), so that on a busy machine the operating system
runs the firing loop's threads first; :func:`blocking` runs a request's store work on such a
thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.web.middleware import json_bytes, send_answer

__all__ = [
    "NICE",
    "QUEUE_WAIT",
    "RETRY_AFTER",
    "BoundedRequests",
    "blocking",
    "lower_priority",
]

_log = logging.getLogger("jobhost.http")
_T = TypeVar("_T")
QUEUE_WAIT = 2.0
"""Seconds a request waits for a place before it is answered 503."""
RETRY_AFTER = 2
NICE = 10
_NEVER_WAIT = ("/healthz", "/readyz", "/metrics")
_lowered = threading.local()


class BoundedRequests:
    """At most ``limit`` requests at work; more wait ``wait`` seconds, then 503."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int,
        wait: float = QUEUE_WAIT,
    ) -> None:
        self.app = app
        self.limit = limit
        self.wait = wait
        self._places: anyio.Semaphore | None = None
        self.refused = 0
        """How many requests were answered 503 for want of a place."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _NEVER_WAIT:
            await self.app(scope, receive, send)
            return
        if self._places is None:  # made on the server's event loop, at its first request
            self._places = anyio.Semaphore(self.limit)
        places = self._places
        admitted = False
        with anyio.move_on_after(self.wait):  # bounds the wait for a place, not the work
            await places.acquire()
            admitted = True
        if admitted:
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
        await _busy(send, self.limit)


async def _busy(send: Send, limit: int) -> None:
    body = json_bytes(
        {"error": f"busy: {limit} requests are at work (http_concurrency); try again shortly"}
    )
    headers = {
        "content-type": "application/json",
        "retry-after": str(RETRY_AFTER),
        "cache-control": "no-store",
    }
    await send_answer(send, 503, body, headers)


async def blocking(call: Callable[[], _T], limiter: anyio.CapacityLimiter | None = None) -> _T:
    """Run ``call`` on a worker thread (one of ``limiter``'s, or of the shared pool), at a lower
    priority than the firing loop's; a request timeout abandons it rather than waiting."""

    def lowered() -> _T:
        lower_priority()
        return call()

    return await anyio.to_thread.run_sync(lowered, abandon_on_cancel=True, limiter=limiter)


def lower_priority() -> None:
    """Give the calling thread nice :data:`NICE`, once (Linux: each thread has its own)."""
    if getattr(_lowered, "done", False):
        return
    _lowered.done = True
    # Not Linux, or not allowed: the limit on requests still holds.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
