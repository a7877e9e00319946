"""The two applications jobhost serves: beside a running host, and over the store alone.

Both carry the operator endpoints, the job API under ``/api/v1`` (when ``api_tokens`` are set),
the caller's ``routes``, then the dashboard at ``/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.running_host import RunningHost
from jobhost.store import Store
from jobhost.web.access import GuessBrake, ReadAccess
from jobhost.web.app import create_app
from jobhost.web.bodies import MAX_FORM
from jobhost.web.deferred import DeferredApp
from jobhost.web.endpoints import host_endpoints, store_endpoints
from jobhost.web.exposition import ExpositionCache

__all__ = ["METRICS_FRESH", "host_application", "store_application"]

METRICS_FRESH = 5.0
"""Seconds a large ``/metrics`` exposition is kept before a scrape has it rendered again."""


def host_application(
    host: RunningHost, metrics: Callable[[], bytes], routes: Sequence[BaseRoute] = ()
) -> DeferredApp:
    """``jobhost run``'s application: the endpoints of ``host``, then ``routes``.

    The probes and ``/metrics`` answer from the start; the API and the dashboard are imported
    and built by the first request for them, so that they do not delay the host's start."""
    settings = host.settings
    brake = GuessBrake(host.store)
    access = ReadAccess(settings, brake)
    endpoints = host_endpoints(host, ExpositionCache(metrics, METRICS_FRESH))
    timeout = settings.http_request_timeout.total_seconds()
    bodies = _bodies(settings)

    def whole() -> Starlette:
        from jobhost.web.api import api_routes
        from jobhost.web.console import Console

        console = Console(settings, host.catalog, host.store, allow_actions=True, brake=brake)
        api = api_routes(settings, host.catalog, host.store, brake=brake)
        return create_app(
            endpoints,
            routes=[*api, *routes],
            pages=console.routes(),
            request_timeout=timeout,
            access=access,
            concurrency=settings.http_concurrency,
            **bodies,
        )

    probes = create_app(
        endpoints,
        request_timeout=timeout,
        access=access,
        concurrency=settings.http_concurrency,
        **bodies,
    )
    return DeferredApp(probes, whole)


def store_application(
    settings: Settings, catalog: Catalog, store: Store, routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """``jobhost serve``'s application: read-only over the store, no host, no ``/metrics``."""
    from jobhost.web.api import api_routes
    from jobhost.web.console import Console

    brake = GuessBrake(store)
    console = Console(settings, catalog, store, allow_actions=False, brake=brake)
    return create_app(
        store_endpoints(settings, catalog, store),
        routes=[*api_routes(settings, catalog, store, brake=brake), *routes],
        pages=console.routes(),
        request_timeout=settings.http_request_timeout.total_seconds(),
        access=ReadAccess(settings, brake),
        concurrency=settings.http_concurrency,
        **_bodies(settings),
    )


class _Bodies(TypedDict):
    body_limit: int
    body_timeout: float


def _bodies(settings: Settings) -> _Bodies:
    """How much of a body is read before admission (the most any endpoint reads), and how long
    it may take."""
    return {
        "body_limit": max(settings.api_body_limit, MAX_FORM),
        "body_timeout": settings.http_body_timeout.total_seconds(),
    }
