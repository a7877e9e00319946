"""The ASGI application jobhost serves, beside a running host or over the store alone: the
operator endpoints, the job API under ``/api/v1`` (when ``api_tokens`` are set), the caller's
``routes``, then the dashboard at ``/``. Every ``GET`` route answers ``HEAD`` too.

The API and the dashboard cost a fair share of the host's start-up to import and build, and
``jobhost run`` serves ``/readyz`` from the moment it listens: :class:`DeferredApp` answers the
probes and ``/metrics`` from a small application with the same endpoints and middleware, and
builds the whole application at the first request that needs it. Not on a background thread
once the host is ready: that would land on the host's first fires, and a host only probed and
scraped never needs it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import anyio
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.gauges import RunningHost
from jobhost.store import Store
from jobhost.store.engine import is_store_down
from jobhost.web.access import GuessBrake, ReadAccess
from jobhost.web.endpoints import (
    Endpoints,
    ExpositionCache,
    Probe,
    host_endpoints,
    store_endpoints,
)
from jobhost.web.middleware import (
    MAX_FORM,
    PROBES,
    QUEUE_WAIT,
    BodiesFirst,
    BoundedRequests,
    RefuseNul,
    RequestTimeout,
    SafeAnswers,
    StoreUnavailable,
    blocking,
    failure_body,
    log_unexpected,
    problem_body,
)

__all__ = ["DeferredApp", "create_app", "host_application", "store_application"]

METRICS_FRESH = 5.0
"""Seconds a large ``/metrics`` exposition is kept before a scrape has it rendered again."""


def host_application(
    host: RunningHost, metrics: Callable[[], bytes], routes: Sequence[BaseRoute] = ()
) -> DeferredApp:
    """``jobhost run``'s application; the API and the dashboard are built when first asked."""
    settings, brake = host.settings, GuessBrake(host.store)
    endpoints = host_endpoints(host, ExpositionCache(metrics, METRICS_FRESH))
    return DeferredApp(
        _app(settings, brake)(endpoints),
        lambda: _whole(settings, host.catalog, host.store, endpoints, routes, brake=brake),
    )


def store_application(
    settings: Settings, catalog: Catalog, store: Store, routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """``jobhost serve``'s application: read-only over the store, no host, no ``/metrics``."""
    endpoints = store_endpoints(settings, catalog, store)
    return _whole(
        settings, catalog, store, endpoints, routes, brake=GuessBrake(store), actions=False
    )


def _whole(
    settings: Settings,
    catalog: Catalog,
    store: Store,
    endpoints: Endpoints,
    routes: Sequence[BaseRoute],
    *,
    brake: GuessBrake,
    actions: bool = True,
) -> Starlette:
    from jobhost.web.api.routes import api_routes
    from jobhost.web.console.pages import Console

    console = Console(settings, catalog, store, allow_actions=actions, brake=brake)
    api = api_routes(settings, catalog, store, brake=brake)
    return _app(settings, brake)(endpoints, routes=[*api, *routes], pages=console.routes())


def _app(settings: Settings, brake: GuessBrake) -> partial[Starlette]:
    """:func:`create_app` with the settings; a body is read up to the most any endpoint reads."""
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
        probe = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
        if probe and scope["path"] in PROBES:
            await self._quick(scope, receive, send)
            return
        app = self._app
        if app is None:
            app = await blocking(self.built)
        await app(scope, receive, send)

    def built(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                self._app = self._build()
            return self._app


class PrettyJSON(JSONResponse):
    """JSON indented for people, as ``jobhost ... --json`` prints it."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, indent=2).encode()


_PROBE_THREADS = 4
"""Worker threads of the probes' own: pages and the API, all at work on a slow store, may hold
every thread of the shared pool, and a probe must not wait behind them."""


_API_PATH = "/api/v1/"


def create_app(
    endpoints: Endpoints,
    *,
    routes: Sequence[BaseRoute] = (),
    pages: Sequence[BaseRoute] = (),
    request_timeout: float = 30.0,
    access: ReadAccess | None = None,
    concurrency: int | None = None,
    queue_wait: float = QUEUE_WAIT,
    body_limit: int = MAX_FORM,
    body_timeout: float = 10.0,
) -> Starlette:
    """The operator endpoints, then ``routes``, then ``pages``; the 404 answer lists all but
    ``pages`` (the dashboard, for people)."""
    # Compact: the report of a large catalog is megabytes, and indenting it costs more than
    # building it (the standard library indents in pure Python).
    closed = access if access is not None and access.report_needs_token else None
    own = [
        Route("/healthz", _probe(endpoints.liveness, inline=True), methods=["GET"]),
        Route("/readyz", _probe(endpoints.readiness), methods=["GET"]),
        Route("/report", _read("/report", endpoints.report, JSONResponse, closed), methods=["GET"]),
    ]
    if endpoints.metrics is not None:
        closed = access if access is not None and access.metrics_need_token else None
        text = partial(Response, media_type=CONTENT_TYPE_LATEST)
        own.append(Route("/metrics", _read("/metrics", endpoints.metrics, text, closed)))
    listed = [*own, *routes]
    paths = sorted(str(getattr(route, "path", "?")) or "/" for route in listed)

    async def not_found(request: Request, _error: Exception) -> Response:
        if isinstance(_error, HTTPException) and _error.status_code != 404:
            return PrettyJSON({"error": _error.detail}, _error.status_code, _error.headers)
        # The path is the caller's text and never echoed. A path under the API that its own
        # catch-all could not match (a line break in a segment) still answers as the API does.
        if request.url.path.startswith(_API_PATH):
            detail = f"no such endpoint; the API is described at {_API_PATH}openapi.json"
            body = problem_body(404, "Not found", detail)
            return JSONResponse(body, 404, media_type="application/problem+json")
        return PrettyJSON({"error": "no such endpoint", "endpoints": paths}, 404)

    bounded = (
        [Middleware(BoundedRequests, limit=concurrency, wait=queue_wait)] if concurrency else []
    )
    return Starlette(
        routes=[*listed, *pages],
        middleware=[
            Middleware(SafeAnswers),
            Middleware(BodiesFirst, limit=body_limit, seconds=body_timeout),
            *bounded,
            Middleware(StoreUnavailable, answers=endpoints.store_answers),
            Middleware(RequestTimeout, seconds=request_timeout),
            Middleware(RefuseNul),
        ],
        exception_handlers={HTTPException: not_found},
    )


Handler = Callable[[Request], Any]


def _read(
    path: str, read: Callable[[], Any], answer: Callable[[Any], Response], closed: ReadAccess | None
) -> Handler:
    """``answer(read())``, read on a worker thread; with ``closed``, only for a token it takes.
    A failing read answers a bare 500 with an id the log carries; the host goes on."""

    async def endpoint(request: Request) -> Response:
        if closed is not None and (refused := await closed.refusal(request, path)) is not None:
            return refused
        try:
            return answer(await blocking(read))
        except Exception as error:
            if is_store_down(error):
                raise  # answered 503 by StoreUnavailable
            failure_id = log_unexpected(request.method, path, error)
            return PrettyJSON(failure_body(failure_id), 500)

    return endpoint


def _probe(probe: Probe, *, inline: bool = False) -> Handler:
    """``inline``: the probe reads only memory, so it runs on the event loop; it never waits
    for a worker thread, which requests stuck on a hung store may all hold."""

    threads: list[anyio.CapacityLimiter] = []  # made on the server's loop, at the first probe

    async def endpoint(_request: Request) -> Response:
        if inline:
            ok, detail = probe()
        else:
            if not threads:
                threads.append(anyio.CapacityLimiter(_PROBE_THREADS))
            ok, detail = await blocking(probe, threads[0])
        return PrettyJSON({"ok": ok, "detail": detail}, 200 if ok else 503)

    return endpoint
