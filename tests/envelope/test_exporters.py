"""Exporters come from the standard OTEL_* variables, and a dead collector changes nothing."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest

from jobhost.clock import SystemClock
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.reporting import configure_telemetry
from jobhost.firing.tick import Ticker
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.store.actions import request_run
from tests.support import run_log_writer, run_through, sample_catalog


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_endpoint_means_no_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    telemetry = configure_telemetry()
    try:
        assert telemetry.tracer_provider._active_span_processor._span_processors == ()  # type: ignore[attr-defined]
    finally:
        telemetry.shutdown()


def test_without_an_exporter_spans_cost_nothing_but_keep_their_trace_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    telemetry = configure_telemetry()
    try:
        with telemetry.tracer.start_as_current_span("sample.ok") as span:
            assert not span.is_recording()
            assert span.get_span_context().is_valid, "the ledger's trace_id stays"
    finally:
        telemetry.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_unreachable_collector_leaves_outcomes_unchanged(
    monkeypatch: pytest.MonkeyPatch, sample_settings: object, protocol: str, tmp_path: object
) -> None:
    port = _closed_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    telemetry = configure_telemetry()
    processors = telemetry.tracer_provider._active_span_processor._span_processors  # type: ignore[attr-defined]
    assert len(processors) == 1
    with telemetry.tracer.start_as_current_span("probe") as probe:
        assert probe.is_recording(), "with an exporter, spans are recorded"
    settings = sample_settings([{"name": "sample.ok", "cron": "0 3 * * *"}])  # type: ignore[operator]
    engine = create_store_engine(settings.database_url)
    try:
        upgrade(engine)
        catalog = sample_catalog(settings)
        clock = SystemClock()
        ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="h",
            lease_duration=timedelta(minutes=1),
            telemetry=telemetry,
        )
        ticker.sync(clock())
        envelope = RunEnvelope(
            Store(engine, clock),
            host_id="h",
            grace=timedelta(seconds=1),
            telemetry=telemetry,
            run_logs=run_log_writer(Store(engine)),
        )
        outcomes = []
        began = time.monotonic()
        for _ in range(3):
            with engine.begin() as connection:
                request_run(connection, "sample.ok", "tester", None, clock())
            ((claim, spec),) = ticker.tick(clock(), 1).claims
            outcomes.append(run_through(envelope, claim, spec).outcome)
        # Runs do not wait for the exporter: three runs take far less than one export timeout.
        assert time.monotonic() - began < 1.0
        assert outcomes == ["succeeded"] * 3
    finally:
        telemetry.shutdown()
        engine.dispose()
