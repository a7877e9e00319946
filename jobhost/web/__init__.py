"""The HTTP surface: one ASGI application (Starlette) served by uvicorn.

:mod:`.endpoints` says what the probes, ``/metrics`` and ``/report`` answer; :mod:`.surfaces`
builds the application and takes extra routes; :mod:`.server` serves it beside a host
(``jobhost run``) or alone (``jobhost serve``).
"""

from __future__ import annotations

from jobhost.web.endpoints import Endpoints, host_endpoints, prometheus_reader, store_endpoints
from jobhost.web.server import WebServer
from jobhost.web.surfaces import create_app

__all__ = [
    "Endpoints",
    "WebServer",
    "create_app",
    "host_endpoints",
    "prometheus_reader",
    "store_endpoints",
]
