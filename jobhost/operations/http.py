"""The HTTP surface of ``jobhost run``: probes, Prometheus metrics and the report.

The application lives in :mod:`jobhost.web`; this module keeps the names earlier callers use.
``OperatorServer(address, endpoints)`` serves just the operator endpoints.
"""

from __future__ import annotations

from jobhost.web import Endpoints, WebServer, create_app, host_endpoints, prometheus_reader

__all__ = ["Endpoints", "OperatorServer", "host_endpoints", "prometheus_reader"]


class OperatorServer(WebServer):
    """The operator endpoints alone, served on ``address``."""

    def __init__(self, address: tuple[str, int], endpoints: Endpoints) -> None:
        super().__init__(address, create_app(endpoints))
