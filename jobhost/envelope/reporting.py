"""OpenTelemetry for runs: one span per run, one ``jobhost`` meter, exporters from ``OTEL_*``.

Exporters are chosen by the SDK's standard variables (OTLP over HTTP by default), in background
threads: an unreachable collector costs a warning, never a changed outcome or a blocked run.
The SDK folds label sets past its cardinality limit (2,000) into one overflow series, which
per-job alerts would silently stop matching; the views raise it to fit :data:`JOB_CAPACITY`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

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

from jobhost.records import FINISHED as OUTCOMES

__all__ = [
    "OUTCOMES",
    "SERIES_PER_JOB",
    "UNIT_RESULTS",
    "Telemetry",
    "configure_telemetry",
    "metric_views",
]

METER_NAME = "jobhost"
_SDK_DEFAULT_LIMIT = 2000
# Few buckets, because every bucket is a series per job: runs take seconds, minutes or longer;
# starts are on time (under a second), late (a minute), or late by a downtime.
DURATION_BUCKETS = (1.0, 60.0, 600.0)
LAG_BUCKETS = (1.0, 60.0)
UNIT_RESULTS = ("succeeded", "failed", "skipped_already_done")
SERIES_PER_JOB = len(OUTCOMES) + (len(DURATION_BUCKETS) + 3) + (len(LAG_BUCKETS) + 3)
"""The Prometheus series of one job's runs: one counter per outcome and two histograms."""
JOB_CAPACITY = 100_000
"""Jobs whose series the instruments hold; a limit allocates nothing until a catalog uses it."""


@dataclass
class Telemetry:
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
        self.schedule_lag_seconds = 0.0  # set by the host each turn
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
        self.group_running: dict[str, int] = {}  # set by the host each heartbeat
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

    def shutdown(self, timeout_seconds: float = 5.0) -> None:
        """Flush and stop the exporters within a bound: the SDK retries an unreachable
        collector for a long while."""

        def _run() -> None:
            for provider in self._owned:
                provider.shutdown()

        worker = threading.Thread(target=_run, name="jobhost-telemetry", daemon=True)
        worker.start()
        worker.join(timeout_seconds)


def metric_views(job_label: bool = True) -> list[View]:
    """Views that keep the instruments' labels to the documented ones (no ``job`` without
    ``job_label``)."""
    job = {"job"} if job_label else set()
    per_job = JOB_CAPACITY if job_label else 1
    limited = (  # instrument, labels, label sets it may hold
        ("jobhost.runs", {*job, "outcome"}, per_job * len(OUTCOMES)),
        ("jobhost.run.duration", job, per_job),
        ("jobhost.run.lag", job, per_job),
        ("jobhost.run.units", {*job, "result"}, per_job * len(UNIT_RESULTS)),
        ("jobhost.job.overdue", {"job", "critical"}, JOB_CAPACITY),
    )
    by_label = (
        ("jobhost.audit.sink_failures", "sink"),
        ("jobhost.concurrency_group.waits", "group"),
        ("jobhost.concurrency_group.running", "group"),
        ("jobhost.audit.dropped", "sink"),
    )
    return [
        *(
            # At least the SDK's default, which also bounds the label sets of the job-less views.
            View(
                instrument_name=name,
                attribute_keys=keys,
                aggregation_cardinality_limit=max(n, _SDK_DEFAULT_LIMIT),
            )
            for name, keys, n in limited
        ),
        *(View(instrument_name=name, attribute_keys={key}) for name, key in by_label),
    ]


def configure_telemetry(
    extra_readers: Sequence[MetricReader] = (), *, job_label: bool = True
) -> Telemetry:
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "jobhost")})
    span_exporter: SpanExporter | None = _exporter("TRACES", "OTLPSpanExporter")
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
    metric_exporter: MetricExporter | None = _exporter("METRICS", "OTLPMetricExporter")
    if metric_exporter is not None:
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    meter_provider = MeterProvider(
        resource=resource,
        metric_readers=readers,
        shutdown_on_exit=False,
        views=metric_views(job_label),
    )
    return Telemetry(tracer_provider, meter_provider, [tracer_provider, meter_provider])


def _exporter(signal: str, name: str) -> Any:
    """The OTLP exporter ``name`` of ``signal`` when the environment asks for one."""
    env = os.environ.get
    exporter = env(f"OTEL_{signal}_EXPORTER", "otlp").strip().lower()
    endpoint = env(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporter == "none" or not endpoint:
        return None
    protocol = env(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env("OTEL_EXPORTER_OTLP_PROTOCOL")
    transport = "grpc" if (protocol or "").strip().lower() == "grpc" else "http"
    kind = signal.lower().removesuffix("s")
    module = import_module(f"opentelemetry.exporter.otlp.proto.{transport}.{kind}_exporter")
    return getattr(module, name)()
