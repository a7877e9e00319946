"""Fan-out runs through the real envelope and store, on both backends.

A failing unit leaves the run failed, names the unit in the run's error and is retried alone
on the next attempt; the counts reach the ledger row, the span, the audit record and history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.firing.tick import Ticker
from jobhost.operations.render import Style, history_lines
from jobhost.operations.runs import history_json
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from jobhost.store.snapshot import JobRead
from tests.support import ManualClock, run_log_writer, run_through, sample_catalog

JOB = "sample.tenants"
TENANTS = {
    "name": JOB,
    "cron": "* * * * *",
    "behaviour": "fan-out",
    "units": 10,
    "fail_units": "tenant-003",
    "max_attempts": 2,
    "backoff": "1s",
    "jitter": 0,
}


class _Host:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        engine: Engine,
        clock: ManualClock,
        telemetry: Any,
    ) -> None:
        self.catalog, self.engine, self.clock = catalog, engine, clock
        self.ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="host-0",
            lease_duration=settings.lease_duration,
            telemetry=telemetry,
        )
        self.envelope = RunEnvelope(
            Store(engine, clock),
            host_id="host-0",
            grace=timedelta(seconds=1),
            telemetry=telemetry,
            run_logs=run_log_writer(Store(engine)),
            store_time=clock,
        )

    def run_due(self) -> list[str]:
        claims = [claim for claim, _ in self.ticker.tick(self.clock(), 8).claims]
        return [
            run_through(self.envelope, c, self.catalog.jobs[c.job_name]).outcome for c in claims
        ]


@pytest.fixture
def host(
    sample_settings: Callable[..., Settings], clock: ManualClock, telemetry: Any
) -> Iterator[_Host]:
    settings = sample_settings([TENANTS])
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    made = _Host(settings, sample_catalog(settings), engine, clock, telemetry[0])
    made.ticker.sync(clock())
    yield made
    engine.dispose()


def _runs(engine: Engine) -> list[RunRecord]:
    with reading(engine) as connection:
        rows = connection.execute(select(runs).order_by(runs.c.attempt)).mappings()
        return [RunRecord.from_row(r) for r in rows]


def test_a_failing_unit_fails_the_run_and_is_retried_alone(
    host: _Host,
    clock: ManualClock,
    run_log: Path,
    telemetry: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobhost.audit")
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    assert host.run_due() == ["failed"]
    clock.now += timedelta(seconds=3)
    assert host.run_due() == ["succeeded"]

    first, second = _runs(host.engine)
    assert (first.attempt, first.outcome, second.attempt, second.outcome) == (
        1,
        "failed",
        2,
        "succeeded",
    )
    assert first.error_type == "FanOutFailed"
    assert first.error_message == "1 of 10 units failed: tenant-003: tenant-003 refused"
    assert first.units is not None and (first.units.succeeded, first.units.failed) == (9, 1)
    assert second.units is not None
    assert (second.units.succeeded, second.units.skipped_already_done) == (1, 9)

    # The unit log: nine tenants done by attempt 1, tenant-003 alone by attempt 2.
    done = [line.split() for line in Path(f"{run_log}.units").read_text().splitlines()]
    assert sorted(tenant for tenant, _, _ in done) == [f"tenant-{i:03d}" for i in range(10)]
    assert [tenant for tenant, _, attempt in done if attempt == "2"] == ["tenant-003"]

    spans = [s for s in telemetry[1].get_finished_spans() if s.name == JOB]
    assert [dict(s.attributes or {}).get("units.failed") for s in spans] == [1, 0]
    assert dict(spans[1].attributes or {})["units.skipped_already_done"] == 9

    # The units counter adds both attempts up, by result.
    metrics = telemetry[2].get_metrics_data()
    units = {
        point.attributes["result"]: point.value
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "jobhost.run.units"
        for point in metric.data.data_points
        if point.attributes["job"] == JOB
    }
    assert units == {"succeeded": 10, "failed": 1, "skipped_already_done": 9}

    audits = [json.loads(r.getMessage()) for r in caplog.records if r.name == "jobhost.audit"]
    assert [a["units"] for a in audits] == [
        {"total": 10, "succeeded": 9, "failed": 1, "skipped_already_done": 0},
        {"total": 10, "succeeded": 1, "failed": 0, "skipped_already_done": 9},
    ]

    rows = Store(host.engine).job_page(JobRead(JOB, history=20)).history
    assert [r["units"] for r in history_json(JOB, rows)["runs"]] == [
        {"total": 10, "succeeded": 1, "failed": 0, "skipped_already_done": 9},
        {"total": 10, "succeeded": 9, "failed": 1, "skipped_already_done": 0},
    ]
    text = "\n".join(history_lines(JOB, rows, Style(colour=False)))
    assert "10 units: 1 succeeded, 0 failed, 9 already done" in text
    assert "10 units: 9 succeeded, 1 failed, 0 already done" in text


def test_a_run_without_a_fan_out_has_no_counts(
    sample_settings: Callable[..., Settings], clock: ManualClock, telemetry: Any
) -> None:
    settings = sample_settings([{"name": "sample.plain", "cron": "* * * * *"}])
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    try:
        plain = _Host(settings, sample_catalog(settings), engine, clock, telemetry[0])
        plain.ticker.sync(clock())
        clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
        assert plain.run_due() == ["succeeded"]
        (run,) = _runs(engine)
        assert run.units is None
        assert history_json("sample.plain", [run])["runs"][0]["units"] is None
    finally:
        engine.dispose()
