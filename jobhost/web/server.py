"""Serving the application with uvicorn: in a thread beside a host, or as the whole process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from jobhost.errors import ConfigError
from jobhost.web.admission import lower_priority
from jobhost.web.lingering import LingeringHttp

__all__ = ["WebServer"]

_log = logging.getLogger("jobhost.http")
# Idle keep-alive connections are closed after this long, so a stuck client holds nothing.
_KEEP_ALIVE_SECONDS = 5
_MAX_CONNECTIONS = 200


class WebServer:
    """uvicorn on ``address``, bound at construction so the port is known and errors early."""

    def __init__(self, address: tuple[str, int], app: ASGIApp) -> None:
        """Bind ``address`` now; :class:`ConfigError` (exit 3) when it cannot be listened on."""
        self._socket = _bind(address)
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=_KEEP_ALIVE_SECONDS,
            limit_concurrency=_MAX_CONNECTIONS,
            timeout_graceful_shutdown=2,
            server_header=False,
            # Nothing here speaks WebSocket: its protocol libraries (a fair share of the
            # host's start-up to import) are not loaded.
            ws="none",
            http=LingeringHttp,
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
