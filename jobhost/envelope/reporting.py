"""Reporting a recorded run, off the recorder's thread: metrics, the audit line, module sinks;
and the OpenTelemetry they report to (:func:`configure_telemetry`).

Each destination has a lane of its own: a bounded queue drained by one thread. The built-in
lane records the metrics and writes the JSON audit line; every sink a module adds gets a lane,
so a slow or hanging sink delays only its own records, never the ledger, the audit line or
another sink. A lane whose queue is full drops the record, counts it on the
``jobhost.audit.dropped`` metric and warns (once a minute at most, with the count). A lane's
thread ends after a while without work and starts again with the next record, so an idle host
holds no thread for it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

from jobhost_contracts import AuditSink, RunAuditRecord
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

__all__ = [
    "DURATION_BUCKETS",
    "FAN_OUT_SERIES_PER_JOB",
    "JOB_CAPACITY",
    "LAG_BUCKETS",
    "LANE_CAPACITY",
    "OUTCOMES",
    "SERIES_PER_JOB",
    "UNIT_RESULTS",
    "UNSUCCESSFUL",
    "BoundedSink",
    "JsonLogSink",
    "Reporter",
    "Telemetry",
    "configure_telemetry",
    "metric_views",
    "sink_name",
]

_log = logging.getLogger("jobhost.envelope")
LANE_CAPACITY = 10_000
"""Records a lane holds before it drops: at 1,000 runs a second, ten seconds of reporting."""
_IDLE_SECONDS = 10.0
_DROP_WARNING_SECONDS = 60.0


class Reporter:
    """Hands each recorded run to the metrics, the JSON audit line and every module sink."""

    def __init__(
        self,
        sinks: Sequence[AuditSink],
        telemetry: Telemetry,
        timeout: float,
        *,
        capacity: int = LANE_CAPACITY,
    ) -> None:
        self._telemetry = telemetry
        inline = [s for s in sinks if getattr(s, "inline", False)]
        builtin = [JsonLogSink()] if not any(isinstance(s, JsonLogSink) for s in inline) else []
        self._builtin = [*builtin, *inline]
        self._lanes = [_Lane("json-log", self._report_inline, capacity, self._dropped)]
        for sink in sinks:
            if sink in inline:
                continue
            bounded = BoundedSink(sink, timeout)
            self._lanes.append(
                _Lane(bounded.name, self._bounded_delivery(bounded), capacity, self._dropped)
            )

    def submit(self, entry: RunAuditRecord) -> None:
        """Queue ``entry`` on every lane; never blocks."""
        for lane in self._lanes:
            lane.offer(entry)

    def drain(self, timeout: float) -> bool:
        """Wait until every lane has delivered what it holds (at most ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        return all(lane.drain(deadline) for lane in self._lanes)

    def _report_inline(self, entry: RunAuditRecord) -> None:
        labels = {"job": entry.job_name, "outcome": entry.outcome}
        duration = max((entry.finished_at - entry.started_at).total_seconds(), 0.0)
        self._telemetry.runs.add(1, labels)
        # One duration histogram per job, not per outcome: it bounds the series a job costs.
        self._telemetry.duration.record(duration, {"job": entry.job_name})
        if entry.occurrence is not None:
            lag = (entry.started_at - entry.occurrence).total_seconds()
            self._telemetry.lag.record(max(lag, 0.0), {"job": entry.job_name})
        if (units := entry.units) is not None:
            for result, count in (
                ("succeeded", units.succeeded),
                ("failed", units.failed),
                ("skipped_already_done", units.skipped_already_done),
            ):
                self._telemetry.units.add(count, {"job": entry.job_name, "result": result})
        for sink in self._builtin:
            try:
                sink.record(entry)
            except Exception as error:
                self._failed(sink_name(sink), entry, f"{type(error).__name__}: {error}")

    def _bounded_delivery(self, sink: BoundedSink) -> Callable[[RunAuditRecord], None]:
        def deliver(entry: RunAuditRecord) -> None:
            error = sink.record(entry)
            if error is not None:
                self._failed(sink.name, entry, error)

        return deliver

    def _failed(self, name: str, entry: RunAuditRecord, error: str) -> None:
        self._telemetry.sink_failures.add(1, {"sink": name})
        _log.warning(
            "audit sink %s failed for run %s of %s: %s; the outcome (%s) stands",
            name,
            entry.run_id,
            entry.job_name,
            error,
            entry.outcome,
        )

    def _dropped(self, lane: _Lane, warn: bool) -> None:
        self._telemetry.audit_dropped.add(1, {"sink": lane.name})
        if warn:
            _log.warning(
                "audit sink %s is %d records behind: dropped %d record(s) so far "
                "(the ledger has every run)",
                lane.name,
                lane.capacity,
                lane.dropped,
            )


class _Lane:
    """A bounded queue and the one thread that delivers from it."""

    def __init__(
        self,
        name: str,
        deliver: Callable[[RunAuditRecord], None],
        capacity: int,
        on_drop: Callable[[_Lane, bool], None],
    ) -> None:
        self.name = name
        self.capacity = capacity
        self._deliver = deliver
        self._on_drop = on_drop
        self._queue: queue.Queue[RunAuditRecord] = queue.Queue(capacity)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self._warned_at = -_DROP_WARNING_SECONDS

    def offer(self, entry: RunAuditRecord) -> None:
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1
            now = time.monotonic()
            warn = now - self._warned_at >= _DROP_WARNING_SECONDS
            if warn:
                self._warned_at = now
            self._on_drop(self, warn)
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"jobhost-report-{self.name}", daemon=True
                )
                self._thread.start()

    def drain(self, deadline: float) -> bool:
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def _run(self) -> None:
        while True:
            try:
                entry = self._queue.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    # Under the lock that ``offer`` starts a thread with: an entry queued
                    # before this check is delivered by this thread, one after by a new one.
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            try:
                self._deliver(entry)
            except Exception:  # reporting must never end the lane
                _log.exception("audit sink %s: reporting run %s failed", self.name, entry.run_id)
            finally:
                self._queue.task_done()


# -- the sinks ---------------------------------------------------------------------------------
# Audit sinks after the ledger: the JSON log line and whatever modules add.
#
# Each sink a module adds gets the record in a thread of its own and a bounded time (the built-in
# JSON line is written directly); :mod:`jobhost.envelope.reporting` calls them off the recorder's
# thread. A sink that raises or hangs is reported with a warning and the
# ``jobhost.audit.sink_failures`` metric; the run's outcome is already in the ledger and stays
# what it is.

UNSUCCESSFUL = frozenset({"failed", "timed_out", "abandoned"})
"""Outcomes a person reading the log must see without parsing the audit line."""
_FIRST_LINE = 300


class JsonLogSink:
    """One structured JSON line per finished run on the ``jobhost.audit`` logger, and for a run
    that failed, timed out or was abandoned a WARNING a person reads, on ``jobhost.run``:
    ``job shop.remind run 4fe9... failed (attempt 1 of a manual run): ValueError: no ledger``.
    """

    name = "json-log"
    inline = True
    """Built in and bounded by the logging system: called directly, not in a thread."""

    def __init__(
        self, logger: logging.Logger | None = None, people: logging.Logger | None = None
    ) -> None:
        self._logger = logger or logging.getLogger("jobhost.audit")
        # A logger of its own: a pipeline reading jobhost.audit as JSON lines stays JSON.
        self._people = people or logging.getLogger("jobhost.run")

    def record(self, entry: RunAuditRecord) -> None:
        fields = {name: getattr(entry, name) for name in _field_names(type(entry))}
        if entry.result is not None:
            # The line carries the value, not its text: a log pipeline reads it as JSON.
            fields["result"] = json.loads(entry.result)
        self._logger.info(_LINE.encode({"event": "run.finished", **fields}))
        if entry.outcome in UNSUCCESSFUL:
            self._people.warning(
                "job %s run %s %s (attempt %d of a %s run): %s",
                entry.job_name,
                entry.run_id,
                entry.outcome,
                entry.attempt,
                entry.source,
                _first_line(entry),
            )


def _first_line(entry: RunAuditRecord) -> str:
    message = (entry.error_message or "").strip().splitlines()
    first = message[0] if message else "no message"
    if len(first) > _FIRST_LINE:
        first = f"{first[:_FIRST_LINE]}..."
    kind = entry.error_type
    # A business Failure's type says nothing its text does not; an exception's type does.
    return first if kind in {None, "Failure"} else f"{kind}: {first}"


def sink_name(sink: AuditSink) -> str:
    """The name a sink reports under (``name``, else its class's)."""
    return str(getattr(sink, "name", type(sink).__name__))


class BoundedSink:
    """A module's sink, called in a thread of its own and given ``timeout`` seconds to answer.

    A call that does not answer in time keeps its thread; the next record waits for it (within
    the same bound) before the sink is called again, so a hanging sink holds one thread, not one
    per record.
    """

    def __init__(self, sink: AuditSink, timeout: float) -> None:
        self.name = sink_name(sink)
        self._sink = sink
        self._timeout = timeout
        self._busy: threading.Thread | None = None

    def record(self, entry: RunAuditRecord) -> str | None:
        """Hand ``entry`` to the sink; return what went wrong, or ``None``."""
        if self._busy is not None:
            self._busy.join(self._timeout)
            if self._busy.is_alive():
                return f"no answer within {self._timeout:g}s (an earlier record still holds it)"
            self._busy = None
        errors: list[BaseException] = []

        def _target() -> None:
            try:
                self._sink.record(entry)
            except BaseException as error:  # a sink must never take the host down
                errors.append(error)

        worker = threading.Thread(target=_target, name=f"jobhost-audit-{self.name}", daemon=True)
        worker.start()
        worker.join(self._timeout)
        if worker.is_alive():
            self._busy = worker
            return f"no answer within {self._timeout:g}s"
        if errors:
            return f"{type(errors[0]).__name__}: {errors[0]}"
        return None


def _field_names(kind: type[RunAuditRecord]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclass_fields(kind))
    return names


_FIELD_NAMES: dict[type[RunAuditRecord], tuple[str, ...]] = {}


def _plain(value: object) -> object:
    """A value JSON has no word for, as the line writes it: asked only of those (the C encoder
    writes the rest), at a thousand lines a second."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")


_LINE = json.JSONEncoder(sort_keys=True, default=_plain)


# -- telemetry ---------------------------------------------------------------------------------
# OpenTelemetry for runs: one span per run, one ``jobhost`` meter, exporters from ``OTEL_*``.
#
# Exporters are chosen by the SDK's standard variables, not by host settings: with
# ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the per-signal ``..._TRACES_ENDPOINT`` /
# ``..._METRICS_ENDPOINT``) set, spans and metrics go out over OTLP, gRPC or HTTP as
# ``OTEL_EXPORTER_OTLP_PROTOCOL`` says (HTTP/protobuf by default, as the specification has it).
# Nothing is exported otherwise. Exports happen in background threads, so an unreachable collector
# costs a warning from the SDK, never a changed outcome or a blocked run.
#
# Series are bounded per job: ``jobhost.runs`` has one per outcome the job has had (at most
# seven), ``jobhost.run.duration`` one histogram (:data:`DURATION_BUCKETS`: 3 buckets, so 6
# Prometheus series with ``+Inf``, ``_sum`` and ``_count``), ``jobhost.run.lag`` one histogram
# (:data:`LAG_BUCKETS`: 2 buckets, 5 series). ``metrics_job_label = false`` drops the ``job``
# label from all of them (views on the meter provider), for catalogs too large for per-job series.
#
# The SDK folds every label set past its cardinality limit (2,000 per instrument by default) into
# one ``otel.metric.overflow`` series, so per-job alerts would silently stop matching from about a
# thousand jobs on; the views raise the limit of each per-job instrument to fit
# :data:`JOB_CAPACITY` jobs.

METER_NAME = "jobhost"
_SDK_DEFAULT_LIMIT = 2000
# Few buckets, because every bucket is a series per job: runs take seconds, minutes or longer;
# starts are on time (under a second), late (a minute), or late by a downtime.
DURATION_BUCKETS = (1.0, 60.0, 600.0)
LAG_BUCKETS = (1.0, 60.0)
OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled", "abandoned", "skipped", "missed")
UNIT_RESULTS = ("succeeded", "failed", "skipped_already_done")
SERIES_PER_JOB = len(OUTCOMES) + (len(DURATION_BUCKETS) + 3) + (len(LAG_BUCKETS) + 3)
"""The Prometheus series of one job's runs: one counter per outcome and two histograms."""
FAN_OUT_SERIES_PER_JOB = len(UNIT_RESULTS)
"""The series a job that fans out adds: one units counter per result."""
JOB_CAPACITY = 100_000
"""The jobs whose per-job series the instruments hold before the SDK folds them into overflow.

A limit only caps what is recorded (nothing is allocated for unused room), and the ``job`` label
takes only the store's job names, so the room costs nothing until a catalog uses it."""


@dataclass
class Telemetry:
    """The tracer and the instruments every run reports to."""

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    _owned: list[TracerProvider | MeterProvider] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tracer = self.tracer_provider.get_tracer("jobhost")
        self.meter = meter = self.meter_provider.get_meter(METER_NAME)
        self.runs = meter.create_counter(
            "jobhost.runs",
            unit="{run}",
            description="Finished runs and recorded occurrences, by job and outcome",
        )
        self.duration = meter.create_histogram(
            "jobhost.run.duration",
            unit="s",
            description="Run duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.lag = meter.create_histogram(
            "jobhost.run.lag",
            unit="s",
            description="Start minus scheduled occurrence",
            explicit_bucket_boundaries_advisory=LAG_BUCKETS,
        )
        self.units = meter.create_counter(
            "jobhost.run.units",
            unit="{unit}",
            description="Fan-out units of finished runs, by job and result",
        )
        self.sink_failures = meter.create_counter(
            "jobhost.audit.sink_failures",
            unit="{failure}",
            description="Audit sinks that raised or timed out, by sink",
        )
        self.audit_dropped = meter.create_counter(
            "jobhost.audit.dropped",
            unit="{record}",
            description="Audit records a sink's full queue dropped, by sink",
        )
        self.schedule_lag_seconds = 0.0
        """Set by the host each turn: how long its oldest due, unclaimed occurrence waited."""
        meter.create_observable_gauge(
            "jobhost.schedule.lag",
            callbacks=[self._observe_schedule_lag],
            unit="s",
            description="How far behind this host's oldest due, unclaimed occurrence is",
        )

        self.group_waits = meter.create_counter(
            "jobhost.concurrency_group.waits",
            unit="{wait}",
            description="Occurrences, retries and manual runs that found their concurrency "
            "group full and waited, by group",
        )
        self.group_running: dict[str, int] = {}
        """Set by the host each heartbeat: running runs per concurrency group, every replica."""
        meter.create_observable_gauge(
            "jobhost.concurrency_group.running",
            callbacks=[self._observe_group_running],
            unit="{run}",
            description="Runs of each concurrency group running now, across every replica",
        )

    def _observe_schedule_lag(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.schedule_lag_seconds)

    def _observe_group_running(self, _options: CallbackOptions) -> Iterable[Observation]:
        for group, running in list(self.group_running.items()):
            yield Observation(running, {"group": group})

    def install_globally(self) -> None:
        """Make these providers the process's, so executors' own spans nest under run spans."""
        trace.set_tracer_provider(self.tracer_provider)
        metrics.set_meter_provider(self.meter_provider)

    def flush(self, timeout_millis: int = 5000) -> None:
        """Push out what is buffered (a short-lived ``jobhost trigger`` calls this before exit)."""
        self._bounded(lambda p: p.force_flush(timeout_millis), timeout_millis / 1000)

    def shutdown(self, timeout_seconds: float = 5.0) -> None:
        """Flush and stop the exporters, giving up after ``timeout_seconds``.

        An unreachable collector makes the SDK retry for a long while; a stopping host must not
        wait for it longer than this (the exporters' threads are daemons and end with the
        process).
        """
        self._bounded(lambda p: p.shutdown(), timeout_seconds)

    def _bounded(self, step: Callable[[Any], object], timeout_seconds: float) -> None:
        def _run() -> None:
            for provider in self._owned:
                step(provider)

        worker = threading.Thread(target=_run, name="jobhost-telemetry", daemon=True)
        worker.start()
        worker.join(timeout_seconds)


def metric_views(job_label: bool = True) -> list[View]:
    """Views that keep the instruments' labels to the documented ones; without ``job_label``
    no instrument keeps the ``job`` label, so the series no longer grow with the catalog."""
    job = {"job"} if job_label else set()
    per_job = JOB_CAPACITY if job_label else 1
    return [
        View(
            instrument_name="jobhost.runs",
            attribute_keys={*job, "outcome"},
            aggregation_cardinality_limit=_limit(per_job * len(OUTCOMES)),
        ),
        View(
            instrument_name="jobhost.run.duration",
            attribute_keys=job,
            aggregation_cardinality_limit=_limit(per_job),
        ),
        View(
            instrument_name="jobhost.run.lag",
            attribute_keys=job,
            aggregation_cardinality_limit=_limit(per_job),
        ),
        View(
            instrument_name="jobhost.run.units",
            attribute_keys={*job, "result"},
            aggregation_cardinality_limit=_limit(per_job * len(UNIT_RESULTS)),
        ),
        View(
            instrument_name="jobhost.job.overdue",
            attribute_keys={"job", "critical"},
            aggregation_cardinality_limit=_limit(JOB_CAPACITY),
        ),
        View(instrument_name="jobhost.audit.sink_failures", attribute_keys={"sink"}),
        View(instrument_name="jobhost.concurrency_group.waits", attribute_keys={"group"}),
        View(instrument_name="jobhost.concurrency_group.running", attribute_keys={"group"}),
        View(instrument_name="jobhost.audit.dropped", attribute_keys={"sink"}),
    ]


def _limit(label_sets: int) -> int:
    """At least the SDK's default, which also bounds the label sets of the job-less views."""
    return max(label_sets, _SDK_DEFAULT_LIMIT)


def configure_telemetry(
    service_name: str = "jobhost",
    extra_readers: Sequence[MetricReader] = (),
    *,
    job_label: bool = True,
) -> Telemetry:
    """Providers wired to the exporters the ``OTEL_*`` environment asks for, if any."""
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    span_exporter = _span_exporter()
    # Shut down by the host within a bound, not by the SDK's exit hook, which waits on retries.
    # With nowhere to send spans, none is recorded: a run's span still has its trace id (the
    # ledger and the audit line keep it), but its attributes and events cost nothing.
    tracer_provider = TracerProvider(
        resource=resource,
        shutdown_on_exit=False,
        sampler=ALWAYS_OFF if span_exporter is None else None,  # None: OTEL_TRACES_SAMPLER
    )
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers: list[MetricReader] = list(extra_readers)
    metric_exporter = _metric_exporter()
    if metric_exporter is not None:
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    meter_provider = MeterProvider(
        resource=resource,
        metric_readers=readers,
        shutdown_on_exit=False,
        views=metric_views(job_label),
    )
    return Telemetry(tracer_provider, meter_provider, [tracer_provider, meter_provider])


def _protocol(signal: str) -> str:
    return (
        (
            os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        .strip()
        .lower()
    )


def _wanted(signal: str) -> bool:
    exporter = os.environ.get(f"OTEL_{signal}_EXPORTER", "otlp").strip().lower()
    endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return exporter != "none" and bool(endpoint)


def _span_exporter() -> SpanExporter | None:
    if not _wanted("TRACES"):
        return None
    if _protocol("TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    return trace_exporter.OTLPSpanExporter()


def _metric_exporter() -> MetricExporter | None:
    if not _wanted("METRICS"):
        return None
    if _protocol("METRICS") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http import metric_exporter

    return metric_exporter.OTLPMetricExporter()
