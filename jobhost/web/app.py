"""The ASGI application every HTTP surface of jobhost is served by.

Every ``GET`` route answers ``HEAD`` too. The endpoints' callables block (they read the store),
so they run on worker threads, never on the event loop.
"""

from __future__ import annotations

import json
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

from jobhost.web.access import ReadAccess
from jobhost.web.admission import (
    BODY_TIMEOUT,
    MAX_FORM,
    QUEUE_WAIT,
    BodiesFirst,
    BoundedRequests,
    blocking,
)
from jobhost.web.endpoints import Endpoints, Probe
from jobhost.web.inputs import RefuseNul
from jobhost.web.middleware import (
    RequestTimeout,
    SafeAnswers,
    failure_body,
    log_unexpected,
    problem_body,
)
from jobhost.web.unavailable import StoreUnavailable, is_store_down

__all__ = ["blocking", "create_app"]


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
    body_timeout: float = BODY_TIMEOUT,
) -> Starlette:
    """The application: the operator endpoints, then ``routes``, then ``pages``, in order.

    The 404 answer lists the endpoints and ``routes`` (what a program may call); ``pages`` (the
    dashboard, for people) are served but not listed. ``concurrency``: see :mod:`.admission`.
    """
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
    bodies = Middleware(BodiesFirst, limit=body_limit, seconds=body_timeout)
    return Starlette(
        routes=[*listed, *pages],
        middleware=[
            Middleware(SafeAnswers),
            bodies,
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
