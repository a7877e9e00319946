"""What the operator endpoints answer with, for a running host or for the store alone.

- ``/healthz``: 200 while the firing loop turns (its last tick within three poll intervals plus
  five seconds; a host still starting counts from its start; no turn under way for longer than
  the status's ``hung_after``), 503 otherwise;
- ``/readyz``: 200 when the store answers (within a second) at the current schema, the catalog
  is valid and no turn has been under way for longer than the status's ``stall_after``;
- ``/metrics``: the envelope's OpenTelemetry metrics in the Prometheus text format;
- ``/report``: ``jobhost report --json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.gauges import RunningHost
from jobhost.operations.report import build_report
from jobhost.store import Store, StoreError, head_revision
from jobhost.web.exposition import exposition

__all__ = [
    "Endpoints",
    "Probe",
    "host_endpoints",
    "prometheus_reader",
    "store_endpoints",
]

Probe = Callable[[], tuple[bool, str]]
_ANSWER_WITHIN = 1.0
"""Seconds ``/readyz`` waits for the store: a hung one must not hold the probe."""


@dataclass(frozen=True)
class Endpoints:
    """What the server answers with; each callable runs on a worker thread, never the loop's.

    ``metrics`` is None where no host runs in the process (``jobhost serve``): ``/metrics`` is
    then not served.
    """

    liveness: Probe
    readiness: Probe
    metrics: Callable[[], bytes] | None
    report: Callable[[], dict[str, Any]]
    store_answers: Callable[[float], bool] | None = None
    """Whether the store answers a trivial read within so many seconds (see
    :class:`~jobhost.web.unavailable.StoreUnavailable`); None: never asked."""


def prometheus_reader() -> tuple[PrometheusMetricReader, Callable[[], bytes]]:
    """A metric reader for ``configure_telemetry(extra_readers=...)`` and its text renderer.

    The reader registers in a registry of its own (not the process-wide default), so nothing
    but the envelope's metrics reach ``/metrics``.
    """
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    return reader, lambda: exposition(registry)


def host_endpoints(host: RunningHost, metrics: Callable[[], bytes]) -> Endpoints:
    """The endpoints of a running host."""
    limit = (3 * host.settings.poll_interval + timedelta(seconds=5)).total_seconds()

    def liveness() -> tuple[bool, str]:
        status = host.status
        now = time.monotonic()
        if (turn := status.turn_age(now)) > status.hung_after:
            return False, (
                f"hung: the firing loop has been in one turn for {turn:.0f}s "
                f"(limit {status.hung_after:g}s): restart the host"
            )
        if status.too_many_stuck:
            return False, (
                f"{status.stuck} run(s) stuck in code that ignores cancellation "
                f"(limit {status.stuck_limit}): restart the host"
            )
        if status.last_tick is None:
            age = now - status.started
            return age <= limit, f"starting for {age:.1f}s, no tick yet"
        age = now - status.last_tick
        verdict = "turning" if age <= limit else "stalled"
        return age <= limit, f"{verdict}: last tick {age:.1f}s ago (limit {limit:g}s)"

    def readiness() -> tuple[bool, str]:
        if not host.status.catalog_ok:
            return False, "the job catalog is invalid"
        if not host.status.synced:
            return False, "starting: the host has not registered and written its catalog yet"
        status = host.status
        if (turn := status.turn_age(time.monotonic())) > status.stall_after:
            return False, (
                f"stalled: the firing loop has been in one turn for {turn:.0f}s "
                f"(limit {status.stall_after:g}s)"
            )
        return _store_ready(host.store, len(host.catalog.jobs))

    def report() -> dict[str, Any]:
        return build_report(host.settings, host.catalog, host.store, clock=host.clock).to_json()

    return Endpoints(liveness, readiness, metrics, report, host.store.answers)


def store_endpoints(settings: Settings, catalog: Catalog, store: Store) -> Endpoints:
    """The endpoints of ``jobhost serve``: no firing loop, so liveness is the server's own."""

    def liveness() -> tuple[bool, str]:
        return True, "serving the store, no host in this process"

    def readiness() -> tuple[bool, str]:
        return _store_ready(store, len(catalog.jobs))

    def report() -> dict[str, Any]:
        return build_report(settings, catalog, store).to_json()

    return Endpoints(liveness, readiness, None, report, store.answers)


def _store_ready(store: Store, jobs: int) -> tuple[bool, str]:
    if not store.answers(_ANSWER_WITHIN):
        return False, f"store unreachable: no answer within {_ANSWER_WITHIN:g}s"
    try:
        current = store.current_revision()
    except StoreError as error:
        return False, f"store unreachable: {type(error.orig or error).__name__}"
    if current != head_revision():
        return False, f"store schema at {current}, this version needs {head_revision()}"
    return True, f"store reachable at schema {current}, {jobs} jobs"
