"""An application whose probes answer at once while the rest of it is still being built.

``jobhost run`` serves ``/readyz`` from the moment it listens, but the API and the dashboard
(their models, templates and routes) cost a fair share of the host's start-up to import and
build. :class:`DeferredApp` answers ``GET``/``HEAD`` of the probes and ``/metrics`` from a small
application with the same endpoints and middleware, and every other request from the whole
application, built once: on a background thread when the host is ready (:meth:`build_when`),
or by the first request that needs it, which then waits for it. Either way the answer is the
one the whole application gives (the 404 page lists the API's paths), only later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.web.admission import lower_priority

__all__ = ["DeferredApp"]

_log = logging.getLogger("jobhost.http")
_QUICK_METHODS = ("GET", "HEAD")
_QUICK_PATHS = ("/healthz", "/readyz", "/metrics")
_POLL_SECONDS = 0.1


class DeferredApp:
    """``quick`` for ``GET``/``HEAD`` of the probes and ``/metrics``; ``build()``'s application
    for the rest. ``quick`` must answer those exactly as the built application does."""

    def __init__(self, quick: ASGIApp, build: Callable[[], ASGIApp]) -> None:
        self._quick = quick
        self._build = build
        self._lock = threading.Lock()
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in _QUICK_METHODS
            and scope["path"] in _QUICK_PATHS
        ):
            await self._quick(scope, receive, send)
            return
        app = self._app
        if app is None:
            app = await anyio.to_thread.run_sync(self.built)
        await app(scope, receive, send)

    @property
    def is_built(self) -> bool:
        return self._app is not None

    def built(self) -> ASGIApp:
        """The whole application, built on the first call; later calls wait for it."""
        with self._lock:
            if self._app is None:
                self._app = self._build()
            return self._app

    def build_when(self, ready: Callable[[], bool]) -> None:
        """Build on a daemon thread, at a lower priority, once ``ready()`` holds (polled)."""

        def wait_then_build() -> None:
            lower_priority()
            while self._app is None and not ready():
                time.sleep(_POLL_SECONDS)
            try:
                self.built()
            except Exception:
                # A request that needs it builds it again and answers 500 if it still fails.
                _log.exception("building the HTTP application failed")

        threading.Thread(target=wait_then_build, name="jobhost-http-build", daemon=True).start()
