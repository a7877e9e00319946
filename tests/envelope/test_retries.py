"""Retry policy: backoff arithmetic, and the pending retry in the ledger under frozen time."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from freezegun import freeze_time
from jobhost_contracts import RetryPolicy
from sqlalchemy import select

from jobhost.clock import SystemClock
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.lifecycle import next_attempt, retry_delay
from jobhost.firing.tick import Ticker
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs
from tests.support import run_log_writer, run_through, sample_catalog


def test_backoff_doubles_and_stops_at_its_cap() -> None:
    policy = RetryPolicy(
        max_attempts=6, backoff=timedelta(seconds=10), backoff_max=timedelta(seconds=60), jitter=0
    )
    assert [retry_delay(policy, n).total_seconds() for n in range(1, 6)] == [10, 20, 40, 60, 60]


def test_jitter_spreads_within_its_fraction() -> None:
    policy = RetryPolicy(max_attempts=3, backoff=timedelta(seconds=100), jitter=0.2)
    rng = random.Random(7)
    delays = [retry_delay(policy, 1, rng).total_seconds() for _ in range(200)]
    assert min(delays) >= 80 and max(delays) <= 120
    assert max(delays) - min(delays) > 20


def test_only_listed_outcomes_retry_and_only_while_attempts_remain() -> None:
    policy = RetryPolicy(max_attempts=2)

    def retried(outcome: str, attempt: int) -> bool:
        before: Any = SimpleNamespace(
            attempt=attempt, attempt_base=0, job_name="j", occurrence=None, backfill_id=None
        )
        before.idempotency_key = before.requested_by = before.reason = None
        return next_attempt(policy, outcome, before, datetime.now(UTC)) is not None

    assert retried("failed", 1)
    assert retried("timed_out", 1)
    assert not retried("cancelled", 1)
    assert not retried("failed", 2)


# Frozen time reaches the host's clock only: on PostgreSQL the database keeps its own.
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_failed_attempt_queues_its_retry_after_the_backoff(
    sample_settings: Any, telemetry: Any
) -> None:
    job = {
        "name": "sample.flaky",
        "cron": "0 3 * * *",
        "behaviour": "fail",
        "max_attempts": 3,
        "backoff": "10s",
    }
    settings = sample_settings([job])
    engine = create_store_engine(settings.database_url)
    try:
        upgrade(engine)
        catalog = sample_catalog(settings)
        clock = SystemClock()
        with freeze_time("2026-05-04T10:00:00Z") as frozen:
            ticker = Ticker(
                Store(engine),
                catalog.jobs,
                host_id="h",
                lease_duration=timedelta(minutes=1),
                telemetry=telemetry[0],
            )
            ticker.sync(clock())
            envelope = RunEnvelope(
                Store(engine, clock),
                host_id="h",
                grace=timedelta(seconds=1),
                telemetry=telemetry[0],
                run_logs=run_log_writer(Store(engine)),
            )
            with engine.begin() as connection:
                request_run(connection, "sample.flaky", "tester", None, clock())
            ((claim, spec),) = ticker.tick(clock(), 1).claims
            assert run_through(envelope, claim, spec).outcome == "failed"
            frozen.tick(timedelta(seconds=9))
            assert ticker.tick(clock(), 1).claims == []
            frozen.tick(timedelta(seconds=2))
            ((retry, spec),) = ticker.tick(clock(), 1).claims
            assert (retry.attempt, retry.source) == (2, "retry")
            assert retry.idempotency_key == claim.idempotency_key
            assert run_through(envelope, retry, spec).outcome == "failed"
        with reading(engine) as connection:
            rows = [
                RunRecord.from_row(r)
                for r in connection.execute(select(runs).order_by(runs.c.attempt)).mappings()
            ]
        assert [(r.attempt, r.outcome) for r in rows] == [
            (1, "failed"),
            (2, "failed"),
            (3, "pending"),
        ]
        assert rows[2].not_before == datetime(2026, 5, 4, 10, 0, 31, tzinfo=UTC)
    finally:
        engine.dispose()
