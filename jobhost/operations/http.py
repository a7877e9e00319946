"""The HTTP surface of ``jobhost run``: probes, Prometheus metrics and the report.

- ``GET /healthz``: 200 while the firing loop turns (its last tick within three poll intervals
  plus five seconds; a host still starting counts from its start), 503 otherwise;
- ``GET /readyz``: 200 when the store answers at the current schema and the catalog is valid,
  503 otherwise;
- ``GET /metrics``: the envelope's OpenTelemetry metrics in the Prometheus text format;
- ``GET /report``: ``jobhost report --json``.

The probes answer JSON ``{"ok": bool, "detail": str}``. The server is the standard library's
threading server in a daemon thread; it is off unless ``http_listen`` is set.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy.exc import DBAPIError, OperationalError

from jobhost.errors import ConfigError
from jobhost.firing.host import Host
from jobhost.operations.report import build_report
from jobhost.store import head_revision
from jobhost.store.migrate import current_revision

__all__ = ["Endpoints", "OperatorServer", "host_endpoints", "prometheus_reader"]

_log = logging.getLogger("jobhost.http")

Probe = Callable[[], tuple[bool, str]]


@dataclass(frozen=True)
class Endpoints:
    """What the server answers with; each callable runs on the request's thread."""

    liveness: Probe
    readiness: Probe
    metrics: Callable[[], bytes]
    report: Callable[[], dict[str, Any]]


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class OperatorServer:
    """A :class:`ThreadingHTTPServer` on ``address`` serving ``endpoints`` until stopped."""

    def __init__(self, address: tuple[str, int], endpoints: Endpoints) -> None:
        """Bind ``address`` now; :class:`ConfigError` (exit 3) when it cannot be listened on."""
        server_class = _IPv6Server if ":" in address[0] else ThreadingHTTPServer
        try:
            self._server = server_class(address, _handler(endpoints))
        except OSError as error:
            host, port = address
            raise ConfigError(
                [f"http_listen = '{host}:{port}': cannot listen there: {error.strerror or error}"],
                "http_listen",
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="jobhost-http", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def prometheus_reader() -> tuple[PrometheusMetricReader, Callable[[], bytes]]:
    """A metric reader for ``configure_telemetry(extra_readers=...)`` and its text renderer.

    The reader registers in a registry of its own (not the process-wide default), so nothing
    but the envelope's metrics reach ``/metrics``.
    """
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    return reader, lambda: generate_latest(registry)


def host_endpoints(host: Host, metrics: Callable[[], bytes]) -> Endpoints:
    """The endpoints of a running :class:`Host`."""
    poll = host.settings.poll_interval
    limit = (3 * poll + timedelta(seconds=5)).total_seconds()

    def liveness() -> tuple[bool, str]:
        status = host.status
        if status.too_many_stuck:
            return False, (
                f"{status.stuck} run(s) stuck in code that ignores cancellation "
                f"(limit {status.stuck_limit}): restart the host"
            )
        if status.last_tick is None:
            age = time.monotonic() - status.started
            return age <= limit, f"starting for {age:.1f}s, no tick yet"
        age = time.monotonic() - status.last_tick
        verdict = "turning" if age <= limit else "stalled"
        return age <= limit, f"{verdict}: last tick {age:.1f}s ago (limit {limit:g}s)"

    def readiness() -> tuple[bool, str]:
        if not host.status.catalog_ok:
            return False, "the job catalog is invalid"
        if not host.status.synced:
            return False, "starting: the host has not registered and written its catalog yet"
        try:
            current = current_revision(host.engine)
        except (OperationalError, DBAPIError) as error:
            return False, f"store unreachable: {type(error.orig or error).__name__}"
        if current != head_revision():
            return False, f"store schema at {current}, this version needs {head_revision()}"
        return True, f"store reachable at schema {current}, {len(host.catalog.jobs)} jobs"

    def report() -> dict[str, Any]:
        return build_report(host.settings, host.catalog, host.engine, clock=host.clock).to_json()

    return Endpoints(liveness, readiness, metrics, report)


def _handler(endpoints: Endpoints) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "jobhost"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/healthz":
                    self._probe(endpoints.liveness)
                elif path == "/readyz":
                    self._probe(endpoints.readiness)
                elif path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, endpoints.metrics())
                elif path == "/report":
                    self._json(200, endpoints.report())
                else:
                    self._json(404, {"error": f"no such endpoint {path}", "endpoints": _PATHS})
            except Exception as error:  # a failing endpoint answers 500; the host goes on
                _log.warning("HTTP %s failed: %s: %s", path, type(error).__name__, error)
                self._json(500, {"error": f"{type(error).__name__}: {error}"})

        def _probe(self, probe: Probe) -> None:
            ok, detail = probe()
            self._json(200 if ok else 503, {"ok": ok, "detail": detail})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, "application/json", json.dumps(body, indent=2).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("%s " + format, self.address_string(), *args)

    return Handler


_PATHS = ["/healthz", "/readyz", "/metrics", "/report"]
