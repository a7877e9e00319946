"""Serving the application with uvicorn, in a thread beside a host or as the whole process, and
the connections it holds: a deadline on each request head, and a cap on how many.

uvicorn reads a request head for as long as its client keeps sending, never closes a connection
that sends nothing, and its ``limit_concurrency`` counts idle connections. Here instead:

- a request head must be complete within ``header_timeout`` of the connection opening (or of its
  first byte, on a kept-alive connection); a late one is answered 408 and the connection closed;
- past ``max_connections``, a new connection takes the place of the one that has waited longest
  for a head; only when every connection carries a request is the new one refused (503). So a
  client that sends its head at once always gets its request read: the probes answer however
  many slow clients are connected (each closed adds to ``jobhost.http.connections_refused``).

Closing gently: closing a socket with unread input (an upload answered 413 unread) makes the
kernel reset the connection, throwing away what of the answer has not left yet. So a closing
connection sends its answer and FIN, drops what still arrives, and closes when the client is
done or after ``LINGER_SECONDS``. Bytes after a request that ends its connection are dropped,
not parsed as a broken second request that uvicorn would answer 400 over the first answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import ClassVar

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from jobhost.errors import ConfigError
from jobhost.web.middleware import Refusals, lower_priority

__all__ = ["WebServer"]

# Idle keep-alive connections are closed after this long, so a stuck client holds nothing.
_KEEP_ALIVE_SECONDS = 5
MAX_CONNECTIONS = 200
"""Connections held at once; past it a new one takes an idle or unfinished one's place."""
# uvicorn says each malformed request head in a line of its own: one a minute is enough.
_MALFORMED = "Invalid HTTP request received."


class WebServer:
    """uvicorn on ``address``, bound at construction so the port is known and errors early,
    its connections held to :func:`guarded_http`'s limits."""

    def __init__(
        self,
        address: tuple[str, int],
        app: ASGIApp,
        *,
        header_timeout: float = 5.0,
        max_connections: int = MAX_CONNECTIONS,
        trusted_proxies: Sequence[str] = (),
    ) -> None:
        """:class:`ConfigError` (exit 3) when ``address`` cannot be listened on. Only a
        connection from one of ``trusted_proxies`` has its ``X-Forwarded-For`` believed."""
        self._socket = _bind(address)
        with _quieted:  # addFilter adds the same filter once, but without a lock
            logging.getLogger("uvicorn.error").addFilter(_ONCE_PER_MINUTE)
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=_KEEP_ALIVE_SECONDS,
            limit_concurrency=None,
            timeout_graceful_shutdown=2,
            server_header=False,
            # uvicorn believes X-Forwarded-For from 127.0.0.1 by default: anything on the
            # machine (or a local proxy passing it on unchecked) could then pose as any address
            # and slip past the wrong-token brake. Only the operator's proxies are believed.
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies),
            # Nothing here speaks WebSocket: its protocol libraries (a fair share of the
            # host's start-up to import) are not loaded.
            ws="none",
            http=guarded_http(header_timeout=header_timeout, max_connections=max_connections),
        )
        self._server = _Server(config)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Serve on a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._serve_beside, name="jobhost-http", daemon=True)
        self._thread.start()

    def serve(self) -> None:
        """Serve on this thread; on the main thread SIGINT and SIGTERM stop it."""
        asyncio.run(self._server.serve(sockets=[self._socket]))

    def _serve_beside(self) -> None:
        # Beside a host: the event loop (routing, rendering pages) yields to the firing loop.
        lower_priority()
        self.serve()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
        self._socket.close()


class _Server(uvicorn.Server):
    """uvicorn's server, which re-raises SIGINT or SIGTERM once it has stopped, so the process
    would end killed by it: ``jobhost serve`` promises exit 0 on a requested stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        wanted = (signal.SIGINT, signal.SIGTERM)
        before = {sig: signal.signal(sig, self.handle_exit) for sig in wanted}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


class _OncePerMinute(logging.Filter):
    """Lets uvicorn's malformed-request warning through once a minute, counting the rest."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._last: float | None = None
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _MALFORMED:
            return True
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < 60.0:
                self._dropped += 1
                return False
            self._last, dropped, self._dropped = now, self._dropped, 0
        if dropped:
            record.msg = f"{_MALFORMED} ({dropped} more since the last such line, not logged)"
        return True


_quieted = threading.Lock()
_ONCE_PER_MINUTE = _OncePerMinute()


def _bind(address: tuple[str, int]) -> socket.socket:
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise ConfigError(
            [f"http_listen = '{host}:{port}': cannot listen there: {error.strerror or error}"],
            "http_listen",
        ) from None
    sock.setblocking(False)
    return sock


_EVICT_AFTER = 0.25
"""Seconds a connection waits for its head before a newcomer may take its place."""


def _answer(status: bytes, body: bytes, *headers: bytes) -> bytes:
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
    closing gently and deaf to bytes after a closing request (see the module)."""

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
        """Closing it throws away no request: it is closing already, or waits for a head."""
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
    limits = {"header_timeout": header_timeout, "max_connections": max_connections}
    return type("GuardedHttp", (GuardedHttp,), {"refusals": Refusals(), **limits})
