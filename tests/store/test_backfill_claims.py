"""A backfill's occurrences in the claim: last, in free slots, bounded, paused, cancelled, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from jobhost.store import RunRecord, reading
from jobhost.store.backfills import cancel_backfill, create_backfill, get_backfill
from jobhost.store.operations import pause_job, resume_job
from jobhost.store.schema import runs
from tests.support import ManualClock

EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}
NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *", "overlap": "allow", "max_concurrent": 5}
JOBS = [EVERY_MINUTE, NIGHTLY]


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, hour, minute, second, tzinfo=UTC)


def _night(day: int) -> datetime:
    return datetime(2026, 4, day, 3, tzinfo=UTC)


def _backfill(host: Any, days: range, *, concurrency: int = 1, mode: str = "missing") -> str:
    with host.engine.begin() as connection:
        return create_backfill(
            connection,
            job="sample.nightly",
            start=_night(days[0]),
            end=_night(days[-1]) + timedelta(hours=1),
            mode=mode,
            reason="weekend outage",
            actor="ops",
            concurrency=concurrency,
            occurrences=[_night(d) for d in days],
            now=host.clock(),
        )


def _backfilled(host: Any) -> list[RunRecord]:
    query = select(runs).where(runs.c.backfill_id.is_not(None)).order_by(runs.c.occurrence)
    with reading(host.engine) as connection:
        return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def test_scheduled_work_takes_the_slots_first(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas(JOBS)
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 4), concurrency=2)
    (first,) = host.tick(slots=1)
    assert (first.job_name, first.source) == ("sample.minutely", "schedule")
    # The next turn: the minute's run still runs (forbid); the free slots go to the backfill,
    # at most its concurrency, oldest occurrence first.
    claims = host.tick(slots=5)
    assert [(c.source, c.occurrence, c.backfill_id) for c in claims] == [
        ("backfill", _night(1), backfill_id),
        ("backfill", _night(2), backfill_id),
    ]
    assert claims[0].idempotency_key == "sample.nightly:2026-04-01T03:00:00Z"
    assert host.tick(slots=5) == []
    assert host.finish(claims[0]) == "succeeded"
    (third,) = host.tick(slots=5)
    assert third.occurrence == _night(3)


def test_a_paused_job_pauses_its_backfill(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([NIGHTLY])
    clock.now = _at(10, 0, 1)
    _backfill(host, range(1, 3))
    with host.engine.begin() as connection:
        pause_job(connection, "sample.nightly", "ops", "maintenance", clock())
    assert host.tick() == []
    with host.engine.begin() as connection:
        resume_job(connection, "sample.nightly")
    (claim,) = host.tick()
    assert claim.occurrence == _night(1)


def test_cancel_stops_new_claims_and_lets_runs_in_flight_finish(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY])
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 5))
    (claim,) = host.tick()
    with host.engine.begin() as connection:
        assert cancel_backfill(connection, backfill_id, clock())
    assert host.finish(claim) == "succeeded"
    assert host.tick() == []
    with reading(host.engine) as connection:
        record = get_backfill(connection, backfill_id)
    assert record is not None
    assert (record.state, record.finished_at is not None) == ("cancelled", True)
    assert record.counts == {"succeeded": 1, "pending": 3}


def test_two_replicas_run_each_occurrence_once(replicas: Any, clock: ManualClock) -> None:
    first, second = replicas([NIGHTLY], count=2)
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host=first, days=range(1, 11), concurrency=3, mode="all")
    for _ in range(10):
        claims = [(host, claim) for host in (first, second) for claim in host.tick()]
        assert len(claims) <= 3
        for host, claim in claims:
            assert claim.idempotency_key.endswith(f":backfill:{backfill_id}")
            assert host.finish(claim) == "succeeded"
    first.tick()
    done = _backfilled(first)
    assert [r.occurrence for r in done] == [_night(d) for d in range(1, 11)]
    assert {r.outcome for r in done} == {"succeeded"}
    with reading(first.engine) as connection:
        record = get_backfill(connection, backfill_id)
    assert record is not None
    assert (record.state, record.counts) == ("done", {"succeeded": 10})
