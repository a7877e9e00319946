"""The firing loop against a real store, one test body per backend, time from an injected clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from jobhost.config import Settings
from jobhost.firing.tick import Ticker
from jobhost.records import RunRecord, ScheduleRecord
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import pause_job, request_run, resume_job
from jobhost.store.schema import runs, schedules
from tests.support import ManualClock, sample_catalog

EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}


def _runs(engine: Engine, job: str | None = None) -> list[RunRecord]:
    query = select(runs).order_by(runs.c.occurrence, runs.c.attempt)
    if job is not None:
        query = query.where(runs.c.job_name == job)
    with reading(engine) as connection:
        return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def _schedule(engine: Engine, job: str) -> ScheduleRecord:
    with reading(engine) as connection:
        row = connection.execute(select(schedules).where(schedules.c.job_name == job))
        return ScheduleRecord.from_row(row.mappings().one())


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, hour, minute, second, tzinfo=UTC)


def test_an_occurrence_runs_once_when_due_and_not_before(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([EVERY_MINUTE])
    assert _schedule(host.engine, "sample.minutely").next_occurrence == _at(10, 0)
    assert host.tick() == []
    clock.now = _at(10, 0, 0) + timedelta(milliseconds=2)
    (claim,) = host.tick()
    assert claim.occurrence == _at(10, 0)
    assert claim.source == "schedule"
    assert claim.idempotency_key == "sample.minutely:2026-05-04T10:00:00Z"
    assert host.tick() == []
    assert host.finish(claim) == "succeeded"
    (run,) = _runs(host.engine)
    assert (run.outcome, run.attempt, run.host_id) == ("succeeded", 1, "host-0")
    assert _schedule(host.engine, "sample.minutely").next_occurrence == _at(10, 1)


def test_two_replicas_ticking_at_once_claim_one_run(replicas: Any, clock: ManualClock) -> None:
    first, second = replicas([EVERY_MINUTE], count=2)
    clock.now = _at(10, 0, 1)
    claims = first.tick() + second.tick()
    assert len(claims) == 1
    assert [r.outcome for r in _runs(first.engine)] == ["running"]


def test_the_ledger_refuses_a_second_first_attempt(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([EVERY_MINUTE])
    clock.now = _at(10, 0, 1)
    (claim,) = host.tick()
    host.finish(claim)
    # Someone rewinds the schedule (a restored backup, a hand edit): the run row still wins.
    with host.engine.begin() as connection:
        connection.execute(update(schedules).values(next_occurrence=_at(10, 0), due_at=_at(10, 0)))
    assert host.tick() == []
    assert [(r.occurrence, r.attempt) for r in _runs(host.engine)] == [(_at(10, 0), 1)]
    assert _schedule(host.engine, "sample.minutely").next_occurrence == _at(10, 1)


def test_after_downtime_run_once_runs_one_and_records_the_missed(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])
    clock.now = _at(10, 3, 30)
    (claim,) = host.tick()
    assert claim.occurrence == _at(10, 3)
    assert claim.source == "catch-up"
    missed = [r for r in _runs(host.engine) if r.outcome == "missed"]
    assert [(r.occurrence, r.reason, r.attempt) for r in missed] == [
        (_at(10, 0), "downtime", 0),
        (_at(10, 1), "downtime", 0),
        (_at(10, 2), "downtime", 0),
    ]


def test_catch_up_runs_every_missed_occurrence_in_order(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([{**EVERY_MINUTE, "misfire": "catch_up"}])
    clock.now = _at(10, 2, 30)
    done = []
    for _ in range(4):
        for claim in host.tick():
            done.append(claim.occurrence)
            host.finish(claim)
    assert done == [_at(10, 0), _at(10, 1), _at(10, 2)]


def test_an_occurrence_due_during_a_run_is_skipped_under_forbid(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE], lease_duration="5m")
    clock.now = _at(10, 0, 1)
    (claim,) = host.tick()
    clock.now = _at(10, 1, 1)
    assert host.tick() == []
    skipped = [r for r in _runs(host.engine) if r.outcome == "skipped"]
    assert [(r.occurrence, r.reason) for r in skipped] == [(_at(10, 1), "overlap")]
    host.finish(claim)


def test_allow_overlap_runs_side_by_side_up_to_its_bound(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas(
        [{**EVERY_MINUTE, "overlap": "allow", "max_concurrent": 2}], lease_duration="5m"
    )
    clock.now = _at(10, 0, 1)
    assert len(host.tick()) == 1
    clock.now = _at(10, 1, 1)
    assert len(host.tick()) == 1
    clock.now = _at(10, 2, 1)
    assert host.tick() == []
    assert [r.outcome for r in _runs(host.engine)].count("skipped") == 1


def test_a_dead_hosts_run_is_abandoned_and_the_next_occurrence_runs_elsewhere(
    replicas: Any, clock: ManualClock
) -> None:
    dead, survivor = replicas([EVERY_MINUTE], count=2, lease_duration="20s")
    clock.now = _at(10, 0, 1)
    (lost,) = dead.tick()
    clock.now = _at(10, 0, 30)
    assert survivor.tick() == []
    clock.now = _at(10, 1, 0)
    (claim,) = survivor.tick()
    assert claim.occurrence == _at(10, 1)
    assert survivor.finish(claim) == "succeeded"
    by_id = {r.id: r for r in _runs(dead.engine)}
    assert by_id[lost.run_id].outcome == "abandoned"
    assert "stopped renewing" in (by_id[lost.run_id].error_message or "")
    # The dead host's late answer does not overwrite the verdict.
    assert dead.finish(lost) == "succeeded"
    assert {r.id: r for r in _runs(dead.engine)}[lost.run_id].outcome == "abandoned"


def test_paused_occurrences_are_recorded_missed_and_resume_applies_the_policy(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])
    with host.engine.begin() as connection:
        assert pause_job(connection, "sample.minutely", "ops", "db maintenance", clock())
    clock.now = _at(10, 2, 10)
    assert host.tick() == []
    missed = [(r.occurrence, r.reason) for r in _runs(host.engine) if r.outcome == "missed"]
    assert missed == [(_at(10, 0), "paused"), (_at(10, 1), "paused"), (_at(10, 2), "paused")]
    assert host.tick() == []
    assert len(_runs(host.engine)) == 3
    with host.engine.begin() as connection:
        assert resume_job(connection, "sample.minutely")
    (claim,) = host.tick()
    assert claim.occurrence == _at(10, 2)
    assert len([r for r in _runs(host.engine) if r.outcome == "missed"]) == 3


def test_a_far_future_next_occurrence_is_repaired_when_a_host_starts(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])
    far = datetime(2999, 1, 1, tzinfo=UTC)
    with host.engine.begin() as connection:
        connection.execute(update(schedules).values(next_occurrence=far, due_at=far))
    plan = host.ticker.sync(clock())
    assert plan.repaired == ["sample.minutely"]
    row = _schedule(host.engine, "sample.minutely")
    assert (row.next_occurrence, row.due_at) == (_at(10, 0), _at(10, 0))


def test_a_far_future_lease_does_not_silence_a_job(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([EVERY_MINUTE])
    with host.engine.begin() as connection:
        connection.execute(
            update(schedules).values(
                lease_owner="ghost", lease_expires_at=datetime(2999, 1, 1, tzinfo=UTC)
            )
        )
    clock.now = _at(10, 0, 1)
    # No renewal sets a lease that far out: it is treated as corrupt, not as live.
    (claim,) = host.tick()
    assert claim.occurrence == _at(10, 0)


def test_a_manual_request_runs_through_the_same_claim(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([{**EVERY_MINUTE, "enabled": False}])
    with host.engine.begin() as connection:
        request_id = request_run(connection, "sample.minutely", "alice", "rerun", clock())
    asked = clock()
    clock.advance(seconds=1)
    (claim,) = host.tick()
    assert (claim.source, claim.occurrence, claim.requested_by) == ("manual", None, "alice")
    assert host.finish(claim) == "succeeded"
    (run,) = _runs(host.engine)
    assert (run.queued_at, run.started_at, run.reason) == (asked, clock(), "rerun")
    # The request is the run: one row, known by one id from the moment it is queued.
    assert (run.id, claim.run_id, run.request_status) == (request_id, request_id, "started")


def test_a_manual_request_overlapping_a_run_is_refused(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([EVERY_MINUTE], lease_duration="5m")
    clock.now = _at(10, 0, 1)
    (running,) = host.tick()
    with host.engine.begin() as connection:
        request_id = request_run(connection, "sample.minutely", "alice", None, clock())
    assert host.tick() == []
    refused = next(r for r in _runs(host.engine) if r.id == request_id)
    assert (refused.request_status, refused.outcome, refused.started_at) == (
        "refused",
        "skipped",
        None,
    )
    assert refused.reason is not None
    assert "host-0" in refused.reason and running.run_id in refused.reason


def test_a_failed_attempt_is_retried_with_the_same_idempotency_key(
    replicas: Any, clock: ManualClock
) -> None:
    job = {**EVERY_MINUTE, "behaviour": "fail-once", "max_attempts": 2, "backoff": "10s"}
    (host,) = replicas([job])
    clock.now = _at(10, 0, 1)
    (first,) = host.tick()
    assert host.finish(first) == "failed"
    clock.now = _at(10, 0, 5)
    assert host.tick() == []
    clock.now = _at(10, 0, 12)
    (second,) = host.tick()
    assert (second.attempt, second.source, second.occurrence) == (2, "retry", _at(10, 0))
    assert second.idempotency_key == first.idempotency_key
    assert host.finish(second) == "succeeded"
    assert [(r.attempt, r.outcome) for r in _runs(host.engine)] == [(1, "failed"), (2, "succeeded")]


def test_interval_jobs_keep_their_phase_across_restarts(replicas: Any, clock: ManualClock) -> None:
    job = {"name": "sample.sixhourly", "interval": "6h"}
    (host,) = replicas([job])
    first = _schedule(host.engine, "sample.sixhourly").next_occurrence
    assert first == clock() + timedelta(hours=6)
    clock.advance(hours=2)
    host.ticker.sync(clock())
    assert _schedule(host.engine, "sample.sixhourly").next_occurrence == first


def test_a_changed_trigger_recomputes_and_an_undeclared_job_is_orphaned(
    sample_settings: Callable[..., Settings],
    clock: ManualClock,
    telemetry: Any,
    request: pytest.FixtureRequest,
) -> None:
    settings = sample_settings([EVERY_MINUTE, {"name": "sample.gone", "cron": "0 * * * *"}])
    engine = create_store_engine(settings.database_url)
    request.addfinalizer(engine.dispose)
    upgrade(engine)
    Ticker(
        Store(engine),
        sample_catalog(settings).jobs,
        host_id="a",
        lease_duration=timedelta(60),
        telemetry=telemetry[0],
    ).sync(clock())
    changed = sample_settings([{**EVERY_MINUTE, "cron": "*/5 * * * *"}])
    plan = Ticker(
        Store(engine),
        sample_catalog(changed).jobs,
        host_id="b",
        lease_duration=timedelta(60),
        telemetry=telemetry[0],
    ).sync(clock())
    assert [c.job_name for c in plan.changed] == ["sample.minutely"]
    assert plan.orphaned == ["sample.gone"]
    assert _schedule(engine, "sample.minutely").next_occurrence == _at(10, 0)
    gone = _schedule(engine, "sample.gone")
    assert gone.orphaned and gone.next_occurrence is None


def test_state_writes_with_a_stale_token_are_rejected(replicas: Any, clock: ManualClock) -> None:
    from jobhost_contracts import StaleLeaseError

    from jobhost.store import StoreJobState

    first, second = replicas(
        [{**EVERY_MINUTE, "behaviour": "state"}], count=2, lease_duration="10s"
    )
    clock.now = _at(10, 0, 1)
    (stale,) = first.tick()
    clock.now = _at(10, 1, 0)
    (fresh,) = second.tick()
    assert fresh.fencing_token > stale.fencing_token
    old = StoreJobState(first.engine, "sample.minutely", stale.fencing_token, clock)
    new = StoreJobState(first.engine, "sample.minutely", fresh.fencing_token, clock)
    new.set("cursor", "b")
    with pytest.raises(StaleLeaseError):
        old.set("cursor", "a")
    with pytest.raises(StaleLeaseError):
        old.record("batch-1")
    assert new.get("cursor") == "b"
    assert new.record("batch-1") and not new.record("batch-1")
    assert new.seen("batch-1")


def test_every_run_outcome_is_what_the_run_log_saw(
    replicas: Any, clock: ManualClock, run_log: Path
) -> None:
    (host,) = replicas([{**EVERY_MINUTE, "behaviour": "raise"}])
    clock.now = _at(10, 0, 1)
    (claim,) = host.tick()
    assert host.finish(claim) == "failed"
    (run,) = _runs(host.engine)
    assert (run.error_type, run.error_message) == ("RuntimeError", "bug on attempt 1")
    assert run_log.read_text().split()[1] == claim.run_id


def test_a_fixed_time_job_on_the_spring_forward_day_fires_once_after_the_gap(
    replicas: Any, clock: ManualClock
) -> None:
    clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    (host,) = replicas(
        [{"name": "sample.nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}]
    )
    # 02:30 does not exist in Berlin on 29 March 2026: the run is due at 03:00 CEST (01:00Z).
    assert _schedule(host.engine, "sample.nightly").next_occurrence == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )
    clock.now = datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC)
    assert host.tick() == []
    clock.now = datetime(2026, 3, 29, 1, 0, 0, 5000, tzinfo=UTC)
    (claim,) = host.tick()
    host.finish(claim)
    assert _schedule(host.engine, "sample.nightly").next_occurrence == datetime(
        2026, 3, 30, 0, 30, tzinfo=UTC
    )


def test_a_fixed_time_job_on_the_fall_back_day_fires_on_the_first_pass_only(
    replicas: Any, clock: ManualClock
) -> None:
    clock.now = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    (host,) = replicas(
        [{"name": "sample.nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}]
    )
    fired = []
    # Walk the night of 25 October in five-minute steps: 02:30 local happens twice.
    clock.now = datetime(2026, 10, 24, 23, 0, tzinfo=UTC)
    while clock.now < datetime(2026, 10, 25, 4, 0, tzinfo=UTC):
        for claim in host.tick():
            fired.append(claim.occurrence)
            host.finish(claim)
        clock.advance(minutes=5)
    assert fired == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]


def test_a_corrupt_stored_time_is_reported_and_repaired_and_other_jobs_go_on(
    replicas: Any, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    (host,) = replicas([EVERY_MINUTE, {"name": "sample.other", "cron": "* * * * *"}])
    if host.engine.dialect.name != "sqlite":
        # PostgreSQL's timestamptz cannot hold anything but a time.
        return
    with host.engine.begin() as connection:
        connection.exec_driver_sql(
            "UPDATE schedules SET next_occurrence = 'garbage', lease_expires_at = '2026-13-45' "
            "WHERE job_name = 'sample.minutely'"
        )
    clock.now = _at(10, 0, 1)
    claims = host.tick()
    assert [c.job_name for c in claims] == ["sample.other"]
    assert "'garbage' is not a time" in caplog.text
    assert _schedule(host.engine, "sample.minutely").next_occurrence == _at(10, 1)


def test_a_paused_or_blocked_job_does_not_make_the_loop_spin(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(
        [EVERY_MINUTE, {**EVERY_MINUTE, "name": "sample.caught", "misfire": "catch_up"}],
        lease_duration="5m",
    )
    with host.engine.begin() as connection:
        pause_job(connection, "sample.minutely", "ops", "maintenance", clock())
    clock.now = _at(10, 0, 1)
    (running,) = host.tick()  # sample.caught runs; sample.minutely stays due, paused
    clock.now = _at(10, 1, 1)
    result = host.ticker.tick(clock(), 8)
    assert result.claims == []  # sample.caught waits behind its run, with its backlog kept
    assert result.next_wake is not None and result.next_wake > clock()
    assert running.job_name == "sample.caught"
