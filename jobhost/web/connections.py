"""Connections the HTTP server holds: a deadline on each request head, and a cap on how many.

uvicorn reads a request head for as long as its client keeps sending, never closes a connection
that sends nothing, and its ``limit_concurrency`` counts idle connections (a few hundred idle
clients made it answer every request, the probes included, 503). Here instead:

- a request head must be complete within ``header_timeout`` of the connection opening (or of its
  first byte, on a kept-alive connection); a late one is answered 408 and the connection closed;
- past ``max_connections``, a new connection takes the place of the one that has waited longest
  for a head; only when every connection carries a request is the new one refused (503). So a
  client that sends its head at once always gets its request read: the probes answer however
  many slow clients are connected.

Each connection closed this way adds to ``jobhost.http.connections_refused`` (by ``reason``).

Closing gently: closing a socket with unread input (an upload answered
413 unread, bytes after a closing request) makes the kernel reset the connection, and the reset
throws away what of the answer has not left yet. So a closing connection first sends its answer
and FIN, reads and drops what still arrives, and closes when the client is done or after
``LINGER_SECONDS``. Bytes after a request that ends its connection are dropped, not parsed as a
broken second request that uvicorn would answer 400 over the first answer.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import threading
import time
from collections import Counter
from typing import ClassVar

import h11
from opentelemetry import metrics
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["Refusals", "guarded_http"]

LOG_EVERY_SECONDS = 60.0
_EVICT_AFTER = 0.25
"""Seconds a connection waits for its head before a newcomer may take its place."""

_log = logging.getLogger("jobhost.http")


def _answer(status: bytes, body: bytes, *headers: bytes) -> bytes:
    """A whole answer written straight to the socket, outside h11: no request was read."""
    lines = [
        b"HTTP/1.1 " + status,
        b"content-type: text/plain; charset=utf-8",
        *headers,
        b"connection: close",
        b"content-length: " + str(len(body)).encode(),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


_LATE_HEAD = _answer(b"408 Request Timeout", b"the request head did not arrive in time\n")
_FULL = _answer(b"503 Service Unavailable", b"too many connections; try again\n", b"retry-after: 2")


class Refusals:
    """Where connections closed before their request was read are counted: a metric, and a log
    line of the counts by reason at most every :data:`LOG_EVERY_SECONDS`."""

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
        """Count one connection closed for ``reason`` (head_timeout, evicted, over_capacity,
        body_timeout)."""
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


LINGER_SECONDS = 2.0


class _GentleClose:
    """A transport whose first ``close`` sends FIN after the answer and closes later."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.lingering = False

    def close(self) -> None:
        if self.lingering or self._transport.is_closing() or not self._transport.can_write_eof():
            # A second close (the server stopping) or a transport that cannot half-close.
            self._transport.close()
            return
        self.lingering = True
        try:
            self._transport.write_eof()
        except OSError:  # the client is gone already: nothing to linger for
            self._transport.close()
            return
        # Input paused by flow control would fill the kernel's buffer and stall the client:
        # read on, to drop it.
        self._transport.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_SECONDS, self._transport.close)

    def close_now(self) -> None:
        """Close without lingering: the answer still unsent, and unread input, are lost."""
        self.lingering = True
        self._transport.close()

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


class GuardedHttp(H11Protocol):
    """uvicorn's h11 protocol with a deadline on request heads and a cap on connections,
    closing gently and deaf to bytes after a closing request.

    Made for one server by :func:`guarded_http`, which sets its limits and :attr:`refusals`.
    """

    refusals: ClassVar[Refusals]
    header_timeout: ClassVar[float]
    max_connections: ClassVar[int]
    _closing: _GentleClose
    _head_timer: asyncio.TimerHandle | None = None
    _waiting_since = 0.0
    _evicted = False
    _deferred = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn hands ``self.transport`` to each request's cycle, which closes it once the
        # answer is written: the wrapper turns that close into a lingering one.
        self._closing = _GentleClose(transport)
        self.transport = self._closing  # type: ignore[assignment]
        self._waiting_since = self.loop.time()
        self._arm_head_timer()
        if len(self.connections) > self.max_connections:  # those closing included
            self._make_room()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self._waiting_for_head():
            # A later request on a kept-alive connection: its head is timed from its first byte
            # (the idle wait before it is uvicorn's keep-alive timeout).
            self._arm_head_timer()
        if not (self._closing.lingering or self.conn.their_state is h11.MUST_CLOSE):
            super().data_received(data)
        if not self._waiting_for_head():
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        self._waiting_since = self.loop.time()
        super().on_response_complete()
        if not self._waiting_for_head():
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    @property
    def evictable(self) -> bool:
        """True when closing this connection throws away no request: it is closing already,
        or it waits for a head (unfinished, or none yet after a kept-alive answer)."""
        return self._closing.lingering or self._waiting_for_head()

    def evict(self) -> None:
        self._evicted = True
        self._cancel_head_timer()
        # At once, not lingering: the point is to free the place now.
        self._closing.close_now()

    def _waiting_for_head(self) -> bool:
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _make_room(self) -> None:
        held = [
            other
            for other in self.connections
            if other is not self and isinstance(other, GuardedHttp) and not other._evicted
        ]
        over = len(held) + 1 - self.max_connections
        if over <= 0:  # places are being freed already
            return
        # The longest waiting for a head first; those closing (their answer still leaving)
        # only when no other will do, as cutting them may lose the end of their answer. A
        # connection that opened a moment ago keeps its place: its head may be on its way, and
        # clients that reconnect as fast as they are closed must not push out a real one.
        settled = self.loop.time() - _EVICT_AFTER
        evictable = [other for other in held if other.evictable]
        ready = [o for o in evictable if o._closing.lingering or o._waiting_since <= settled]
        waiting = heapq.nsmallest(
            over, ready, key=lambda other: (other._closing.lingering, other._waiting_since)
        )
        if len(waiting) < over:
            young = [o._waiting_since for o in evictable if o not in ready]
            if young and not self._deferred and over <= self.max_connections:
                # Every head in wait is that young (a crowd that reconnected together): this
                # one waits, over the cap by at most as many again, until the oldest settles.
                self._deferred = True
                self.loop.call_later(max(min(young) - settled, 0.01), self._make_room_later)
                return
            self.refusals.refused("over_capacity")
            self._cancel_head_timer()
            self.transport.write(_FULL)
            self.transport.close()
            return
        for other in waiting:
            if not other._closing.lingering:
                self.refusals.refused("evicted")
            other.evict()

    def _make_room_later(self) -> None:
        # By now this connection may be serving its request: then it keeps its place.
        if self._waiting_for_head() and len(self.connections) > self.max_connections:
            self._make_room()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._waiting_for_head():
            return
        self.refusals.refused("head_timeout")
        self.transport.write(_LATE_HEAD)
        self.transport.close()


def guarded_http(*, header_timeout: float, max_connections: int) -> type[GuardedHttp]:
    """A protocol class for one server, holding to these limits, with refusals of its own."""
    limits = {"header_timeout": header_timeout, "max_connections": max_connections}
    return type("GuardedHttp", (GuardedHttp,), {"refusals": Refusals(), **limits})
