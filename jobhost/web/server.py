"""Serving the application with uvicorn: in a thread beside a host, or as the whole process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import uvicorn
from starlette.types import ASGIApp

from jobhost.errors import ConfigError
from jobhost.web.connections import guarded_http
from jobhost.web.middleware import lower_priority

__all__ = ["WebServer"]

# Idle keep-alive connections are closed after this long, so a stuck client holds nothing.
_KEEP_ALIVE_SECONDS = 5
HEADER_TIMEOUT = 5.0
"""The default of ``http_header_timeout``, in seconds."""
MAX_CONNECTIONS = 200
"""Connections held at once; past it a new one takes an idle or unfinished one's place."""
# uvicorn says each malformed request head in a line of its own: one a minute is enough.
_MALFORMED = "Invalid HTTP request received."


class WebServer:
    """uvicorn on ``address``, bound at construction so the port is known and errors early,
    its connections held to :func:`~jobhost.web.connections.guarded_http`'s limits."""

    def __init__(
        self,
        address: tuple[str, int],
        app: ASGIApp,
        *,
        header_timeout: float = HEADER_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        trusted_proxies: Sequence[str] = (),
    ) -> None:
        """Bind ``address`` now; :class:`ConfigError` (exit 3) when it cannot be listened on.

        Only a connection from one of ``trusted_proxies`` (addresses or networks) has its
        ``X-Forwarded-For`` believed."""
        self._socket = _bind(address)
        _quiet_uvicorn_repeats()
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
    """uvicorn's server, stopping on SIGINT or SIGTERM and then exiting 0.

    uvicorn re-raises the signal once it has stopped, so the process would end killed by it;
    ``jobhost serve`` promises exit 0 on a requested stop.
    """

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


def _quiet_uvicorn_repeats() -> None:
    logger = logging.getLogger("uvicorn.error")
    with _quieted:
        if not any(isinstance(each, _OncePerMinute) for each in logger.filters):
            logger.addFilter(_OncePerMinute())


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
