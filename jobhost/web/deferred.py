"""An application whose probes answer at once while the rest of it is still being built.

``jobhost run`` serves ``/readyz`` from the moment it listens, but the API and the dashboard
(their models, templates and routes) cost a fair share of the host's start-up to import and
build. :class:`DeferredApp` answers ``GET``/``HEAD`` of the probes and ``/metrics`` from a small
application with the same endpoints and middleware, and every other request from the whole
application, built once by the first request that needs it (on a worker thread at the
requests' lower priority; requests arriving meanwhile wait for it). Its answer is the one the
whole application gives (the 404 page lists the API's paths), only later. It is not built on
a background thread once the host is ready: that would land on the host's first answers from
``/readyz`` and its first fires, and a host only probed and scraped never needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.web.app import blocking

__all__ = ["DeferredApp"]

_QUICK_METHODS = ("GET", "HEAD")
_QUICK_PATHS = ("/healthz", "/readyz", "/metrics")


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
            app = await blocking(self.built)
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
