"""Reporting lanes: a slow sink fills only its own bounded queue, which drops and counts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobhost_contracts import RunAuditRecord

from jobhost.envelope.lifecycle import Reporter
from tests.waiting import wait_for

STARTED = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


class _GatedSink:
    """Answers only once the test opens the gate; says when a record reached it."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.received: list[str] = []

    def record(self, entry: RunAuditRecord) -> None:
        self.entered.set()
        self.gate.wait(30)
        self.received.append(entry.run_id)


def _entry(number: int) -> RunAuditRecord:
    return RunAuditRecord(
        job_name="sample.ok",
        module="sample",
        run_id=f"run-{number}",
        occurrence=STARTED,
        attempt=1,
        source="schedule",
        host_id="h",
        outcome="succeeded",
        started_at=STARTED,
        finished_at=STARTED + timedelta(seconds=1),
        duration_ms=1000,
    )


def _lines(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.name == "jobhost.audit")


def _eventually(check: Callable[[], bool]) -> bool:
    return bool(wait_for(check, 10, "the audit line", every=0.005))


def _sum(reader: Any, name: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        key = str(dict(point.attributes))
                        totals[key] = totals.get(key, 0) + point.value
    return totals


def test_a_full_lane_drops_and_counts_while_the_audit_line_and_metrics_go_on(
    telemetry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    t, _, reader = telemetry
    sink = _GatedSink()
    reporter = Reporter([sink], t, timeout=30.0, capacity=2)
    with caplog.at_level(logging.INFO):
        reporter.submit(_entry(0))
        assert sink.entered.wait(10)  # record 0 is in the sink; the lane's queue is empty
        for number in range(1, 6):
            reporter.submit(_entry(number))  # 1 and 2 are queued, 3 to 5 dropped
            # The audit line's lane keeps up (it is as small here): it never waits for the sink.
            assert _eventually(lambda n=number: _lines(caplog) == n + 1)
        assert not reporter.drain(0.2), "the gated sink still holds its lane"
        assert _sum(reader, "jobhost.runs") == {"{'job': 'sample.ok', 'outcome': 'succeeded'}": 6}
        assert _sum(reader, "jobhost.audit.dropped") == {"{'sink': 'gated'}": 3}
        warnings = [r.getMessage() for r in caplog.records if "records behind" in r.getMessage()]
        assert len(warnings) == 1, "one warning per minute, not one per dropped record"
        assert "audit sink gated is 2 records behind: dropped 1 record(s)" in warnings[0]
        sink.gate.set()
        assert reporter.drain(10)
    assert sink.received == ["run-0", "run-1", "run-2"]


def test_a_hanging_sink_holds_one_thread_and_fails_each_record_in_bounded_time(
    telemetry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    t, _, reader = telemetry
    sink = _GatedSink()
    reporter = Reporter([sink], t, timeout=0.1)
    before = threading.active_count()
    with caplog.at_level(logging.WARNING, logger="jobhost.envelope"):
        for number in range(5):
            reporter.submit(_entry(number))
        assert reporter.drain(10)
    # The lanes' two threads and the one call that still hangs: not one thread per record.
    assert threading.active_count() - before <= 3
    assert _sum(reader, "jobhost.audit.sink_failures") == {"{'sink': 'gated'}": 5}
    assert caplog.text.count("an earlier record still holds it") == 4
    sink.gate.set()


def test_a_module_sink_that_calls_itself_inline_still_gets_a_bounded_lane_of_its_own(
    telemetry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    t, _, _ = telemetry
    sink = _GatedSink()
    sink.inline = True  # type: ignore[attr-defined]
    reporter = Reporter([sink], t, timeout=30.0)
    with caplog.at_level(logging.INFO):
        reporter.submit(_entry(0))
        assert sink.entered.wait(10)
        # The audit line does not wait behind the module's sink.
        reporter.submit(_entry(1))
        assert _eventually(lambda: _lines(caplog) == 2)
        sink.gate.set()
        assert reporter.drain(10)
    assert sink.received == ["run-0", "run-1"]
