"""The firing loop with a daylight-saving policy, against a real store on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord
from jobhost.store import reading
from jobhost.store.schema import runs
from tests.store.test_run_fence import hosts
from tests.support import ManualClock

__all__ = ["hosts"]  # a fixture, used by name

NIGHTLY = {"name": "sample.nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}


def _ledger(engine: Engine) -> list[RunRecord]:
    with reading(engine) as connection:
        rows = connection.execute(select(runs).order_by(runs.c.occurrence, runs.c.attempt))
        return [RunRecord.from_row(r) for r in rows.mappings()]


def test_skip_records_the_nonexistent_occurrence_missed_and_runs_the_next_day(
    hosts: Any, clock: ManualClock
) -> None:
    clock.now = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    (host,) = hosts({**NIGHTLY, "dst_gap": "skip"}, 1)
    fired = []
    # Hour by hour through the spring-forward weekend.
    for hour in range(60):
        clock.now = datetime(2026, 3, 28, tzinfo=UTC) + timedelta(hours=hour, seconds=1)
        fired += [claim.occurrence for claim in host.tick()]
    assert fired == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]
    missed = [(r.occurrence, r.outcome, r.reason) for r in _ledger(host.engine) if r.attempt == 0]
    assert missed == [
        (datetime(2026, 3, 29, 1, 30, tzinfo=UTC), "missed", "does not exist on this day")
    ]


def test_the_default_shifts_and_records_nothing_missed(hosts: Any, clock: ManualClock) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    (host,) = hosts(NIGHTLY, 1)
    clock.now = datetime(2026, 3, 29, 1, 0, 1, tzinfo=UTC)
    (claim,) = host.tick()
    assert claim.occurrence == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert [r for r in _ledger(host.engine) if r.attempt == 0] == []


def test_repeat_both_runs_both_passes_of_the_fall_back_hour(hosts: Any, clock: ManualClock) -> None:
    clock.now = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    # Overlap allowed: the first pass's run is never finished here.
    job = {**NIGHTLY, "dst_repeat": "both", "overlap": "allow", "max_concurrent": 2}
    (host,) = hosts(job, 1)
    fired = []
    for minute in range(0, 180, 5):
        clock.now = datetime(2026, 10, 25, tzinfo=UTC) + timedelta(minutes=minute, seconds=1)
        fired += [claim.occurrence for claim in host.tick()]
    assert fired == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    ]
