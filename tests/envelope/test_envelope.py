"""The run envelope: one outcome reaches the ledger, the span, the metrics and the audit sinks."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import StatusCode
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.clock import SystemClock
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope, SupervisedCancellation
from jobhost.envelope.lifecycle import Outcome
from jobhost.envelope.reporting import Telemetry
from jobhost.firing.tick import Ticker
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs
from tests.support import run_log_writer, run_through, sample_catalog


class Harness:
    """A store, a catalog of sample jobs and an envelope; runs jobs by manual request."""

    def __init__(self, settings: Settings, catalog: Catalog, engine: Engine, telemetry: Telemetry):
        self.catalog = catalog
        self.engine = engine
        clock = SystemClock()
        self.ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="test-host",
            lease_duration=timedelta(minutes=1),
            telemetry=telemetry,
        )
        self.ticker.sync(clock())
        self.envelope = RunEnvelope(
            Store(engine, clock),
            host_id="test-host",
            grace=timedelta(seconds=0.5),
            telemetry=telemetry,
            run_logs=run_log_writer(Store(engine)),
            sinks=catalog.audit_sinks,
            sink_timeout=timedelta(seconds=0.5),
        )
        self.clock = clock

    def run(self, job: str, cancel_after: float | None = None) -> tuple[Outcome, RunRecord]:
        with self.engine.begin() as connection:
            request_run(connection, job, "tester", "envelope test", self.clock())
        ((claim, spec),) = self.ticker.tick(self.clock(), 1).claims
        cancellation = SupervisedCancellation()
        if cancel_after is not None:
            threading.Timer(cancel_after, cancellation.cancel, ["shutdown"]).start()
        outcome = run_through(self.envelope, claim, spec, cancellation)
        with reading(self.engine) as connection:
            row = connection.execute(select(runs).where(runs.c.id == claim.run_id))
            return outcome, RunRecord.from_row(row.mappings().one())


@pytest.fixture
def harness(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> Iterator[Callable[..., Harness]]:
    engines: list[Engine] = []

    def make(jobs: list[dict[str, Any]], **values: Any) -> Harness:
        # Jobs here run by manual request; a nightly trigger keeps them valid and out of the way.
        settings = sample_settings([{"cron": "0 3 * * *", **job} for job in jobs], **values)
        engine = create_store_engine(settings.database_url)
        engines.append(engine)
        upgrade(engine)
        return Harness(settings, sample_catalog(settings), engine, telemetry[0])

    yield make
    for engine in engines:
        engine.dispose()


def _points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def _count(reader: InMemoryMetricReader, job: str, outcome: str) -> int:
    return sum(
        p.value
        for p in _points(reader, "jobhost.runs")
        if p.attributes == {"job": job, "outcome": outcome}
    )


def test_success_is_one_span_one_count_and_a_ledger_row_linked_to_the_trace(
    harness: Callable[..., Harness], telemetry: Any
) -> None:
    _, spans, reader = telemetry
    outcome, row = harness([{"name": "sample.ok"}]).run("sample.ok")
    assert outcome.outcome == row.outcome == "succeeded"
    (span,) = spans.get_finished_spans()
    assert span.name == "sample.ok"
    assert span.status.status_code is StatusCode.OK
    assert dict(span.attributes or {}) == {
        "jobhost.job.name": "sample.ok",
        "jobhost.job.module": "sample",
        "jobhost.run.id": row.id,
        "jobhost.run.attempt": 1,
        "jobhost.run.source": "manual",
        "jobhost.run.outcome": "succeeded",
    }
    assert row.trace_id == format(span.context.trace_id, "032x")
    assert _count(reader, "sample.ok", "succeeded") == 1
    (duration,) = _points(reader, "jobhost.run.duration")
    assert duration.count == 1


def test_a_scheduled_run_records_its_occurrence_and_lag(
    sample_settings: Callable[..., Settings], telemetry: Any, clock: Any
) -> None:
    from jobhost.firing.tick import Ticker

    t, spans, reader = telemetry
    settings = sample_settings([{"name": "sample.minutely", "cron": "* * * * *"}])
    engine = create_store_engine(settings.database_url)
    try:
        upgrade(engine)
        catalog = sample_catalog(settings)
        ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="h",
            lease_duration=timedelta(minutes=1),
            telemetry=t,
        )
        ticker.sync(clock())
        clock.advance(seconds=32)
        ((claim, spec),) = ticker.tick(clock(), 1).claims
        envelope = RunEnvelope(
            Store(engine, clock),
            host_id="h",
            grace=timedelta(seconds=1),
            telemetry=t,
            run_logs=run_log_writer(Store(engine)),
            store_time=clock,
        )
        run_through(envelope, claim, spec)
    finally:
        engine.dispose()
    (span,) = spans.get_finished_spans()
    assert (span.attributes or {})["jobhost.run.occurrence"] == "2026-05-04T10:00:00Z"
    (lag,) = _points(reader, "jobhost.run.lag")
    assert lag.sum == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("behaviour", "error_type", "message"),
    [
        ("fail", "Failure", "business failure on attempt 1"),
        ("raise", "RuntimeError", "bug on attempt 1"),
    ],
)
def test_failure_and_exception_both_fail_the_run_everywhere(
    harness: Callable[..., Harness],
    telemetry: Any,
    caplog: pytest.LogCaptureFixture,
    behaviour: str,
    error_type: str,
    message: str,
) -> None:
    _, spans, reader = telemetry
    with caplog.at_level(logging.ERROR, logger="jobhost.envelope"):
        outcome, row = harness([{"name": "sample.bad", "behaviour": behaviour}]).run("sample.bad")
    assert (outcome.outcome, row.outcome) == ("failed", "failed")
    assert (row.error_type, row.error_message) == (error_type, message)
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["jobhost.run.outcome"] == "failed"
    assert _count(reader, "sample.bad", "failed") == 1
    if behaviour == "raise":
        assert [e.name for e in span.events] == ["exception"]
        (record,) = [r for r in caplog.records if r.exc_info]
        assert "bug on attempt 1" in record.getMessage()
    else:
        assert span.events == ()


def test_a_run_past_its_timeout_is_timed_out(harness: Callable[..., Harness]) -> None:
    job = {"name": "sample.slow", "behaviour": "sleep", "seconds": 30, "timeout": "0.3s"}
    outcome, row = harness([job]).run("sample.slow")
    assert (outcome.outcome, row.outcome) == ("timed_out", "timed_out")


def test_an_executor_ignoring_cancellation_is_recorded_stuck(
    harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    # Declared stuck 0.7 s in (timeout, then the grace); its outcome is recorded when it ends.
    job = {
        "name": "sample.stubborn",
        "behaviour": "ignore-cancel",
        "seconds": 1.5,
        "timeout": "0.2s",
    }
    with caplog.at_level(logging.WARNING, logger="jobhost.envelope"):
        outcome, row = harness([job]).run("sample.stubborn")
    assert row.outcome == "timed_out"
    assert outcome.stuck
    assert "ignored cancellation" in caplog.text


def test_cancellation_gives_a_cancelled_run(
    harness: Callable[..., Harness], telemetry: Any
) -> None:
    _, _, reader = telemetry
    job = {"name": "sample.long", "behaviour": "sleep", "seconds": 30}
    outcome, row = harness([job]).run("sample.long", cancel_after=0.2)
    assert (outcome.outcome, row.outcome) == ("cancelled", "cancelled")
    assert _count(reader, "sample.long", "cancelled") == 1


@pytest.mark.parametrize(
    ("behaviour", "expected"), [("async", "succeeded"), ("async-sleep", "timed_out")]
)
def test_async_executors_run_and_are_cancelled(
    harness: Callable[..., Harness], behaviour: str, expected: str
) -> None:
    job = {"name": "sample.aio", "behaviour": behaviour, "seconds": 30, "timeout": "0.3s"}
    outcome, row = harness([job]).run("sample.aio")
    assert (outcome.outcome, row.outcome) == (expected, expected)


def test_the_executor_runs_inside_the_run_span(
    harness: Callable[..., Harness], telemetry: Any
) -> None:
    _, spans, _ = telemetry
    outcome, _ = harness([{"name": "sample.traced", "behaviour": "span-context"}]).run(
        "sample.traced"
    )
    (span,) = spans.get_finished_spans()
    assert outcome.value == format(span.context.span_id, "016x")


def test_failing_and_hanging_audit_sinks_leave_the_outcome_alone(
    sample_settings: Callable[..., Settings],
    harness: Callable[..., Harness],
    telemetry: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, _, reader = telemetry
    jobs = [{"name": "sample.audited", "cron": "0 3 * * *"}]
    made = harness(jobs)
    settings = sample_settings(jobs)
    settings = settings.model_copy(
        update={
            "modules": {
                "sample": {**settings.modules["sample"], "sinks": ["raise", "hang", "record"]}
            }
        }
    )
    catalog = sample_catalog(settings)
    recorder = catalog.audit_sinks[2]
    made.envelope = RunEnvelope(
        Store(made.engine, made.clock),
        host_id="test-host",
        grace=timedelta(seconds=1),
        telemetry=telemetry[0],
        run_logs=run_log_writer(Store(made.engine)),
        sinks=catalog.audit_sinks,
        sink_timeout=timedelta(seconds=0.3),
    )
    with caplog.at_level(logging.WARNING, logger="jobhost.envelope"):
        outcome, row = made.run("sample.audited")
    assert (outcome.outcome, row.outcome) == ("succeeded", "succeeded")
    failures = {
        p.attributes["sink"]: p.value for p in _points(reader, "jobhost.audit.sink_failures")
    }
    assert failures == {"sample-raise": 1, "sample-hang": 1}
    assert "audit backend refused" in caplog.text and "no answer within 0.3s" in caplog.text
    (entry,) = recorder.received  # type: ignore[attr-defined]
    assert (entry.run_id, entry.outcome, entry.trace_id) == (row.id, "succeeded", row.trace_id)


def test_the_json_audit_line_carries_the_run(
    harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    import json

    with caplog.at_level(logging.INFO, logger="jobhost.audit"):
        _, row = harness([{"name": "sample.logged", "behaviour": "fail"}]).run("sample.logged")
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "jobhost.audit"]
    assert line["run_id"] == row.id
    assert (line["job_name"], line["outcome"], line["attempt"]) == ("sample.logged", "failed", 1)
    assert line["error_message"] == "business failure on attempt 1"
    assert line["trace_id"] == row.trace_id
    assert line["host_id"] == "test-host"


def test_a_failed_run_is_a_warning_a_person_reads_beside_the_audit_line(
    harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        _, row = harness([{"name": "sample.logged", "behaviour": "fail"}]).run("sample.logged")
    (warning,) = [r for r in caplog.records if r.name == "jobhost.run"]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        f"job sample.logged run {row.id} failed (attempt 1 of a manual run): "
        "business failure on attempt 1"
    )
    assert [r.name for r in caplog.records].count("jobhost.audit") == 1


def test_a_succeeded_run_writes_no_warning(
    harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        harness([{"name": "sample.logged", "behaviour": "succeed"}]).run("sample.logged")
    assert not [r for r in caplog.records if r.name == "jobhost.run"]
