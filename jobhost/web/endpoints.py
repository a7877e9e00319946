"""What the operator endpoints answer with, for a running host or for the store alone.

- ``/healthz``: 200 while the firing loop turns (its last tick within three poll intervals plus
  five seconds; no turn under way for longer than the status's ``hung_after``), else 503;
- ``/readyz``: 200 when the store answers (within a second) at the current schema, the catalog
  is valid and no turn has been under way for longer than the status's ``stall_after``;
- ``/metrics``: the envelope's OpenTelemetry metrics in the Prometheus text format;
- ``/report``: ``jobhost report --json``.

A 10,000-job catalog with ``metrics_job_label`` exposes some 200,000 lines, and
``prometheus_client.generate_latest`` escapes every label name of every line (seconds of CPU
per scrape): :func:`exposition` writes the same bytes escaping each name once. Collecting still
takes a second, so :class:`ExpositionCache` renders at most once per ``seconds``, on a
background thread, while scrapes answer the last exposition (a render held up by a hung store,
or failing, is never seen); one cheaper than :data:`CHEAP_RENDER` is redone for each scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import floatToGoString

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.errors import SchemaTooNewError
from jobhost.operations.gauges import RunningHost
from jobhost.operations.report import build_report
from jobhost.store import Store, StoreError, head_revision
from jobhost.store.migrate import is_current
from jobhost.web.middleware import lower_priority

__all__ = [
    "CHEAP_RENDER",
    "PATIENCE",
    "Endpoints",
    "ExpositionCache",
    "Probe",
    "exposition",
    "host_endpoints",
    "prometheus_reader",
    "store_endpoints",
]

Probe = Callable[[], tuple[bool, str]]
_ANSWER_WITHIN = 1.0
"""Seconds ``/readyz`` waits for the store: a hung one must not hold the probe."""


@dataclass(frozen=True)
class Endpoints:
    """``metrics`` is None where no host runs (``jobhost serve``): no ``/metrics``."""

    liveness: Probe
    readiness: Probe
    metrics: Callable[[], bytes] | None
    report: Callable[[], dict[str, Any]]
    store_answers: Callable[[float], bool] | None = None
    """Whether the store answers a trivial read within so many seconds; None: never asked."""


def prometheus_reader() -> tuple[PrometheusMetricReader, Callable[[], bytes]]:
    """A metric reader for ``configure_telemetry(extra_readers=...)`` and its text renderer,
    in a registry of its own, so nothing but the envelope's metrics reach ``/metrics``."""
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    return reader, lambda: exposition(registry)


def host_endpoints(host: RunningHost, metrics: Callable[[], bytes]) -> Endpoints:
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
        return build_report(host.settings, host.catalog, host.store).to_json()

    return Endpoints(liveness, readiness, metrics, report, host.store.answers)


def store_endpoints(settings: Settings, catalog: Catalog, store: Store) -> Endpoints:
    """The endpoints of ``jobhost serve``: no firing loop, so liveness is the server's own."""
    return Endpoints(
        liveness=lambda: (True, "serving the store, no host in this process"),
        readiness=lambda: _store_ready(store, len(catalog.jobs)),
        metrics=None,
        report=lambda: build_report(settings, catalog, store).to_json(),
        store_answers=store.answers,
    )


def _store_ready(store: Store, jobs: int) -> tuple[bool, str]:
    if not store.answers(_ANSWER_WITHIN):
        return False, f"store unreachable: no answer within {_ANSWER_WITHIN:g}s"
    try:
        current = store.current_revision()
        if not is_current(current):
            return False, f"store schema at {current}, this version needs {head_revision()}"
    except StoreError as error:
        return False, f"store unreachable: {type(error.orig or error).__name__}"
    except SchemaTooNewError as error:
        return False, str(error)
    return True, f"store reachable at schema {current}, {jobs} jobs"


_log = logging.getLogger("jobhost.metrics")
CHEAP_RENDER = 0.05
PATIENCE = 1.0
_ESCAPING = openmetrics.UNDERSCORES
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
_NAME_SUFFIXES = {"counter": "_total", "info": "_info"}
_TYPES = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram", "unknown": "untyped"}


def exposition(registry: CollectorRegistry) -> bytes:
    """``generate_latest(registry)``'s bytes."""
    output: list[str] = []
    for metric in registry.collect():
        mname = _metric_name(metric.name + _NAME_SUFFIXES.get(metric.type, ""))
        help_text = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        output.append(f"# HELP {mname} {help_text}\n")
        output.append(f"# TYPE {mname} {_TYPES.get(metric.type, metric.type)}\n")
        om_samples: dict[str, list[str]] = {}
        for sample in metric.samples:
            line = _line(sample.name, sample.labels, sample.value, sample.timestamp)
            suffix = sample.name[len(metric.name) :]
            if suffix in _OM_SUFFIXES and sample.name.startswith(metric.name):
                om_samples.setdefault(suffix, []).append(line)
            else:
                output.append(line)
        for suffix, lines in sorted(om_samples.items()):
            name = _metric_name(metric.name + suffix)
            output.append(f"# HELP {name} {help_text}\n")
            output.append(f"# TYPE {name} gauge\n")
            output.extend(lines)
    return "".join(output).encode("utf-8")


class ExpositionCache:
    def __init__(
        self,
        render: Callable[[], bytes],
        seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._render = render
        self._seconds = seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._body: bytes | None = None
        self._made_at = 0.0
        self._took = 0.0
        self._refreshed = threading.Event()
        self._refreshed.set()

    def __call__(self) -> bytes:
        with self._lock:
            body, age = self._body, self._monotonic() - self._made_at
            if body is None:
                return self._make()  # nothing to answer instead
            cheap = self._took < CHEAP_RENDER
            if not cheap and age < self._seconds:
                return body
            if self._refreshed.is_set():
                self._refreshed.clear()
                threading.Thread(target=self._refresh, name="jobhost-metrics", daemon=True).start()
            refreshed = self._refreshed
        # A cheap render is waited for, a moment: one that does not come back (a gauge's read of
        # a hung store) leaves the scrape the last exposition.
        if cheap and refreshed.wait(PATIENCE):
            with self._lock:
                return self._body or body
        return body

    def _make(self, lock: AbstractContextManager[object] | None = None) -> bytes:
        """Render, then keep the body under ``lock`` (None: the caller holds it)."""
        started = self._monotonic()
        body = self._render()  # outside ``lock``: scrapes meanwhile answer the last one
        done = self._monotonic()
        with lock or nullcontext():
            self._body, self._made_at, self._took = body, done, done - started
        return body

    def _refresh(self) -> None:
        lower_priority()
        try:
            self._make(self._lock)
        except Exception as error:  # the last exposition stands; the next scrape tries again
            _log.warning(
                "metrics: rendering failed (%s); answering the last exposition",
                type(error).__name__,
            )
        finally:
            self._refreshed.set()


def _line(name: str, labels: dict[str, str], value: float, timestamp: object) -> str:
    text = ",".join(f'{_label_name(k)}="{_label_value(v)}"' for k, v in sorted(labels.items()))
    stamp = f" {int(float(timestamp) * 1000):d}" if timestamp is not None else ""  # type: ignore[arg-type]
    braces = f"{{{text}}}" if text else ""
    return f"{_metric_name(name)}{braces} {_value(value)}{stamp}\n"


@lru_cache(maxsize=1024)
def _metric_name(name: str) -> str:
    return str(openmetrics.escape_metric_name(name, _ESCAPING))


@lru_cache(maxsize=1024)
def _label_name(name: str) -> str:
    return str(openmetrics.escape_label_name(name, _ESCAPING))


def _label_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


@lru_cache(maxsize=4096)
def _value(value: float) -> str:
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]
