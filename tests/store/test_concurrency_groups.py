"""Concurrency groups in the claim, on both stores: at most N runs of a group across replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord, ScheduleRecord
from jobhost.store import reading
from jobhost.store.actions import request_run
from jobhost.store.claims import RECHECK
from jobhost.store.ledger import group_summaries
from jobhost.store.reports import get_run
from jobhost.store.schema import runs, schedules
from tests.envelope.test_envelope import _points
from tests.support import ManualClock

LIMITS = {"concurrency_limits": {"warehouse": 2}}


def _job(name: str, **values: Any) -> dict[str, Any]:
    return {"name": f"sample.{name}", "cron": "* * * * *", "concurrency_group": "warehouse"} | (
        values
    )


def _at(minute: int, second: float = 0) -> datetime:
    return datetime(2026, 5, 4, 10, minute, tzinfo=UTC) + timedelta(seconds=second)


def _runs(engine: Engine) -> list[RunRecord]:
    with reading(engine) as connection:
        query = select(runs).order_by(runs.c.queued_at, runs.c.job_name)
        return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def _row(engine: Engine, job: str) -> ScheduleRecord:
    with reading(engine) as connection:
        found = connection.execute(select(schedules).where(schedules.c.job_name == job))
        return ScheduleRecord.from_row(found.mappings().one())


def _request(engine: Engine, request_id: str) -> RunRecord:
    with reading(engine) as connection:
        run = get_run(connection, request_id)
    assert run is not None
    return run


def test_two_replicas_start_no_more_than_the_limit(replicas: Any, clock: ManualClock) -> None:
    jobs = [_job(f"w{i}") for i in range(5)]
    first, second = replicas(jobs, count=2, **LIMITS)
    clock.now = _at(0, 1)
    claims = first.tick() + second.tick()
    assert len(claims) == 2
    waiting = [n for n in (j["name"] for j in jobs) if _row(first.engine, n).group_waiting_since]
    assert len(waiting) == 3
    # Waiting is not missing: nothing is recorded for the waiting occurrences.
    assert [r.outcome for r in _runs(first.engine)] == ["running", "running"]
    clock.now += RECHECK
    assert first.tick() + second.tick() == []
    with reading(first.engine) as connection:
        (summary,) = group_summaries(connection, clock())
    assert (summary.name, summary.limit, summary.running, summary.waiting) == (
        "warehouse",
        2,
        2,
        3,
    )


def test_a_freed_slot_goes_to_the_oldest_waiting_occurrence(
    replicas: Any, clock: ManualClock
) -> None:
    jobs = [_job("a"), _job("b"), _job("c")]
    (host,) = replicas(jobs, concurrency_limits={"warehouse": 1})
    clock.now = _at(0, 1)
    (first,) = host.tick()
    host.finish(first)
    order = [first.job_name]
    # The first job's 10:01 occurrence is younger than the others' waiting 10:00 ones.
    clock.now = _at(1, 1)
    for _ in range(3):
        (claim,) = host.tick()
        order.append(claim.job_name)
        host.finish(claim)
        clock.now += RECHECK
    assert sorted(order[:3]) == ["sample.a", "sample.b", "sample.c"]
    assert order[3] == order[0]
    # The two that waited ran once for both their occurrences (run_once): 10:00 is recorded
    # missed, and nothing was recorded while they waited.
    missed = sorted(r.job_name for r in _runs(host.engine) if r.outcome == "missed")
    assert missed == sorted(order[1:3])


def test_a_dead_hosts_slots_free_when_their_leases_expire(
    replicas: Any, clock: ManualClock
) -> None:
    jobs = [_job(f"w{i}") for i in range(3)]
    dead, alive = replicas(jobs, count=2, lease_duration="30s", **LIMITS)
    clock.now = _at(0, 1)
    held = {c.job_name for c in dead.tick()}
    assert len(held) == 2
    clock.now = _at(0, 20)
    assert alive.tick() == []
    clock.now = _at(0, 32)
    (claim,) = alive.tick()
    assert claim.job_name not in held
    outcomes = sorted(r.outcome for r in _runs(alive.engine))
    assert outcomes == ["abandoned", "abandoned", "running"]


def test_the_limit_counts_retries_and_manual_runs(replicas: Any, clock: ManualClock) -> None:
    yearly = "0 0 1 1 *"
    jobs = [
        _job("b", behaviour="fail", max_attempts=2, backoff="5s"),
        _job("m", cron=yearly),
        _job("n", cron=yearly),
    ]
    (host,) = replicas(jobs, concurrency_limits={"warehouse": 1})
    clock.now = _at(0, 1)
    (failing,) = host.tick()
    assert host.finish(failing) == "failed"
    with host.engine.begin() as connection:
        manual_id = request_run(connection, "sample.m", "ops", "rerun", clock())
    clock.now = _at(0, 2)
    (manual,) = host.tick()
    assert (manual.job_name, manual.source) == ("sample.m", "manual")
    # The retry comes due while m holds the group's one slot: it waits, and so does n's request.
    clock.now = _at(0, 8)
    with host.engine.begin() as connection:
        queued_id = request_run(connection, "sample.n", "ops", None, clock())
    assert host.tick() == []
    queued = _request(host.engine, queued_id)
    assert queued.request_status == "queued"
    assert queued.outcome == "pending"
    assert _request(host.engine, manual_id).request_status == "started"
    with reading(host.engine) as connection:
        (summary,) = group_summaries(connection, clock())
    assert (summary.running, summary.waiting) == (1, 2)
    assert summary.waiting_jobs == ("sample.b", "sample.n")
    host.finish(manual)
    clock.now += RECHECK
    # A person waits on the manual run: it is claimed before the retry.
    (late,) = host.tick()
    assert (late.job_name, late.run_id, late.source) == ("sample.n", queued_id, "manual")
    host.finish(late)
    clock.now += RECHECK
    (retry,) = host.tick()
    assert (retry.job_name, retry.attempt) == ("sample.b", 2)


def test_trigger_now_runs_beside_a_full_group_and_says_so(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([_job("a"), _job("m")], concurrency_limits={"warehouse": 1})
    clock.now = _at(0, 1)
    assert len(host.tick()) == 1
    with host.engine.begin() as connection:
        request_id = request_run(
            connection, "sample.m", "ops", "urgent", clock(), beside_limit=True
        )
    (manual,) = host.tick()
    assert manual.job_name == "sample.m"
    assert (
        manual.reason == "urgent; --now: started beside the limit of group warehouse (1 of 1 busy)"
    )
    assert _request(host.engine, request_id).request_status == "started"


def test_a_waiting_occurrence_is_missed_only_past_its_grace(
    replicas: Any, clock: ManualClock
) -> None:
    jobs = [
        _job("a", behaviour="sleep", seconds=0),
        _job("s", misfire="skip", misfire_grace="20s"),
    ]
    (host,) = replicas(jobs, concurrency_limits={"warehouse": 1})
    clock.now = _at(0, 1)
    (claim,) = host.tick()
    assert claim.job_name == "sample.a"
    clock.now = _at(0, 15)
    assert host.tick() == []
    assert [r.outcome for r in _runs(host.engine)] == ["running"]
    clock.now = _at(0, 25)
    assert host.tick() == []
    missed = [
        (r.job_name, r.occurrence, r.reason) for r in _runs(host.engine) if r.outcome == "missed"
    ]
    assert missed == [("sample.s", _at(0), "misfire grace")]
    assert _row(host.engine, "sample.s").group_waiting_since is None


def test_jobs_without_a_group_are_not_held_back(replicas: Any, clock: ManualClock) -> None:
    jobs = [_job("a"), _job("b"), {"name": "sample.free", "cron": "* * * * *"}]
    (host,) = replicas(jobs, concurrency_limits={"warehouse": 1})
    clock.now = _at(0, 1)
    names = sorted(c.job_name for c in host.tick())
    assert len(names) == 2
    assert "sample.free" in names


def test_each_wait_is_counted_once_by_group(
    replicas: Any, clock: ManualClock, telemetry: Any
) -> None:
    (host,) = replicas([_job(f"w{i}") for i in range(4)], **LIMITS)
    clock.now = _at(0, 1)
    assert len(host.tick()) == 2
    for _ in range(3):
        clock.now += RECHECK
        assert host.tick() == []
    points = _points(telemetry[2], "jobhost.concurrency_group.waits")
    assert [(p.attributes, p.value) for p in points] == [({"group": "warehouse"}, 2)]
