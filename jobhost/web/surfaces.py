"""The two applications jobhost serves: beside a running host, and over the store alone.

Both carry the operator endpoints, the job API under ``/api/v1`` (when ``api_tokens`` are set),
the caller's ``routes``, then the dashboard at ``/``.

The API and the dashboard cost a fair share of the host's start-up to import and build, and
``jobhost run`` serves ``/readyz`` from the moment it listens: :class:`DeferredApp` answers the
probes and ``/metrics`` from a small application with the same endpoints and middleware, and
builds the whole application at the first request that needs it (requests meanwhile wait for
it). Not on a background thread once the host is ready: that would land on the host's first
answers and fires, and a host only probed and scraped never needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial

from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.gauges import RunningHost
from jobhost.store import Store
from jobhost.web.access import GuessBrake, ReadAccess
from jobhost.web.admission import MAX_FORM
from jobhost.web.app import blocking, create_app
from jobhost.web.endpoints import ExpositionCache, host_endpoints, store_endpoints
from jobhost.web.middleware import PROBES

__all__ = ["DeferredApp", "host_application", "store_application"]

METRICS_FRESH = 5.0
"""Seconds a large ``/metrics`` exposition is kept before a scrape has it rendered again."""


def host_application(
    host: RunningHost, metrics: Callable[[], bytes], routes: Sequence[BaseRoute] = ()
) -> DeferredApp:
    """``jobhost run``'s application: the endpoints of ``host``, then ``routes``; the API and
    the dashboard are built by the first request for them (see the module)."""
    settings = host.settings
    brake = GuessBrake(host.store)
    endpoints = host_endpoints(host, ExpositionCache(metrics, METRICS_FRESH))
    app = _app(settings, brake)

    def whole() -> Starlette:
        from jobhost.web.api.routes import api_routes
        from jobhost.web.console.pages import Console

        console = Console(settings, host.catalog, host.store, allow_actions=True, brake=brake)
        api = api_routes(settings, host.catalog, host.store, brake=brake)
        return app(endpoints, routes=[*api, *routes], pages=console.routes())

    return DeferredApp(app(endpoints), whole)


def store_application(
    settings: Settings, catalog: Catalog, store: Store, routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """``jobhost serve``'s application: read-only over the store, no host, no ``/metrics``."""
    from jobhost.web.api.routes import api_routes
    from jobhost.web.console.pages import Console

    brake = GuessBrake(store)
    console = Console(settings, catalog, store, allow_actions=False, brake=brake)
    return _app(settings, brake)(
        store_endpoints(settings, catalog, store),
        routes=[*api_routes(settings, catalog, store, brake=brake), *routes],
        pages=console.routes(),
    )


def _app(settings: Settings, brake: GuessBrake) -> partial[Starlette]:
    """:func:`create_app` with what both applications take of the settings. A body is read
    before admission up to the most any endpoint reads."""
    return partial(
        create_app,
        request_timeout=settings.http_request_timeout.total_seconds(),
        access=ReadAccess(settings, brake),
        concurrency=settings.http_concurrency,
        body_limit=max(settings.api_body_limit, MAX_FORM),
        body_timeout=settings.http_body_timeout.total_seconds(),
    )


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
            and scope["method"] in ("GET", "HEAD")
            and scope["path"] in PROBES
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
