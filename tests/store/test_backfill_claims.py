"""A backfill's occurrences in the claim: last, in free slots, bounded, paused, cancelled, once;
each settled by the write of its run's outcome, and read by a host only while a backfill runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, select

from jobhost.records import RunRecord
from jobhost.store import reading
from jobhost.store.actions import pause_job, resume_job
from jobhost.store.backfills import cancel_backfill, create_backfill, get_backfill
from jobhost.store.schema import runs, schedules
from tests.support import ManualClock

EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}
NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *", "overlap": "allow", "max_concurrent": 5}
JOBS = [EVERY_MINUTE, NIGHTLY]
FLAKY = {
    "name": "sample.nightly",
    "cron": "0 3 * * *",
    "behaviour": "fail-once",
    "max_attempts": 2,
    "backoff": "1s",
}
BROKEN = {"name": "sample.nightly", "cron": "0 3 * * *", "behaviour": "fail"}


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


def _record(host: Any, backfill_id: str) -> Any:
    with reading(host.engine) as connection:
        record = get_backfill(connection, backfill_id)
    assert record is not None
    return record


def _statements(host: Any) -> list[str]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(" ".join(str(args[2]).split()))

    event.listen(host.engine, "before_cursor_execute", count)
    return seen


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


def test_the_outcome_write_settles_the_occurrence_and_ends_the_backfill(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY])
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 3), concurrency=2)
    first, second = host.tick()
    assert _record(host, backfill_id).counts == {"claimed": 2}
    # No turn in between: the write of each outcome settles its occurrence.
    assert host.finish(first) == "succeeded"
    assert (_record(host, backfill_id).counts, _record(host, backfill_id).state) == (
        {"succeeded": 1, "claimed": 1},
        "running",
    )
    assert host.finish(second) == "succeeded"
    record = _record(host, backfill_id)
    assert (record.counts, record.state, record.finished) == ({"succeeded": 2}, "done", True)


def test_a_failure_with_a_retry_queued_keeps_its_item_until_the_retry_ends(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([FLAKY])
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 2))
    (claim,) = host.tick()
    assert host.finish(claim) == "failed"
    assert _record(host, backfill_id).counts == {"claimed": 1}
    clock.now += timedelta(seconds=2)
    (retry,) = host.tick()
    assert (retry.attempt, retry.backfill_id) == (2, backfill_id)
    assert host.finish(retry) == "succeeded"
    record = _record(host, backfill_id)
    assert (record.counts, record.state) == ({"succeeded": 1}, "done")


def test_a_failure_without_a_retry_settles_its_item_failed(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([BROKEN])
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 2))
    (claim,) = host.tick()
    assert host.finish(claim) == "failed"
    record = _record(host, backfill_id)
    assert (record.counts, record.state) == ({"failed": 1}, "done")


def test_a_backfill_cancelled_midway_ends_when_its_last_run_in_flight_is_written(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY])
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 7), concurrency=2)
    first, second = host.tick()
    assert host.finish(first) == "succeeded"
    (third,) = host.tick()
    with host.engine.begin() as connection:
        assert cancel_backfill(connection, backfill_id, clock())
    assert host.tick() == []
    assert host.finish(second) == "succeeded"
    assert not _record(host, backfill_id).finished  # the third still runs
    assert host.finish(third) == "succeeded"
    record = _record(host, backfill_id)
    assert (record.state, record.finished) == ("cancelled", True)
    assert record.counts == {"succeeded": 3, "pending": 3}
    assert host.tick() == []
    assert len(_backfilled(host)) == 3


def test_an_abandoned_run_settles_its_item_in_the_abandon_pass(
    replicas: Any, clock: ManualClock
) -> None:
    dead, survivor = replicas([NIGHTLY], count=2, lease_duration="20s")
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(dead, range(1, 3))
    (lost,) = dead.tick()
    clock.now = _at(10, 1, 0)
    (claim,) = survivor.tick()  # the abandon pass records the lost run, then the next night
    assert claim.occurrence == _night(2)
    assert _record(survivor, backfill_id).counts == {"failed": 1, "claimed": 1}
    assert survivor.finish(claim) == "succeeded"
    record = _record(survivor, backfill_id)
    assert (record.counts, record.state) == ({"failed": 1, "succeeded": 1}, "done")
    assert lost.occurrence == _night(1)


def test_a_turn_with_no_backfill_running_reads_no_backfill(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    clock.now = _at(10, 0, 1)
    backfill_id = _backfill(host, range(1, 2))
    claims = host.tick()
    for claim in claims:
        host.finish(claim)
    assert _record(host, backfill_id).state == "done"
    host.tick()
    seen = _statements(host)
    clock.now = _at(10, 1, 1)
    (claim,) = host.tick()
    assert claim.job_name == "sample.minutely"
    # The wake-up read says whether a backfill runs, inside the statement it always was.
    (read,) = [s for s in seen if "FROM backfills" in s]
    assert "schedules.due_at" in read
    assert not any("backfill_id = " in s for s in seen)  # no backfill's runs read


def test_an_announced_host_reads_a_full_backfill_again_once_its_run_ends(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY])
    host.ticker._announced = True  # as a Host builds it
    clock.now = _at(10, 0, 1)
    _backfill(host, range(1, 4))
    (claim,) = host.tick()  # its concurrency is 1: no room left
    seen = _statements(host)
    assert host.tick() == []
    assert not any("in_flight" in s for s in seen)  # the next turn leaves the backfill alone
    assert host.finish(claim) == "succeeded"
    assert host.ticker.run_ended(claim)  # as the host tells it when the run is recorded
    (second,) = host.tick()
    assert second.occurrence == _night(2)
    assert sum("in_flight" in s for s in seen) == 1
    host.ticker._announced = False  # a ticker nobody tells of ends reads on every turn
    seen.clear()
    assert host.tick() == []
    assert sum("in_flight" in s for s in seen) == 1


def test_a_run_that_ends_while_the_backfill_claim_reads_leaves_the_next_turn_to_look(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY])
    host.ticker._announced = True  # as a Host builds it
    clock.now = _at(10, 0, 1)
    _backfill(host, range(1, 4))
    (claim,) = host.tick()  # its concurrency is 1: no room left
    host.ticker.look_everywhere()  # a signal: the next turn reads it
    ended: list[bool] = []

    def end_meanwhile(*args: Any) -> None:
        # The recorder's thread, while the loop's claim reads the backfill still full.
        if "in_flight" in str(args[2]) and not ended:
            ended.append(host.ticker.run_ended(claim))

    event.listen(host.engine, "before_cursor_execute", end_meanwhile)
    assert host.tick(7) == []
    event.remove(host.engine, "before_cursor_execute", end_meanwhile)
    assert ended == [True]
    seen = _statements(host)
    assert host.tick(7) == []
    assert sum("in_flight" in s for s in seen) == 1  # looked again, not held for a second
    seen.clear()
    assert host.tick(7) == []
    assert not any("in_flight" in s for s in seen)  # nothing ended since: held


def test_a_turn_woken_for_a_backfill_slot_claims_its_next_occurrence_after_due_work(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    host.ticker._announced = True  # as a Host builds it
    clock.now = _at(10, 0, 1)
    _backfill(host, range(1, 4))
    minutely, first = host.tick()
    assert (minutely.job_name, first.occurrence) == ("sample.minutely", _night(1))
    assert host.finish(minutely) == "succeeded"
    assert host.finish(first) == "succeeded"
    host.ticker.run_ended(first)  # as the host does when the run is recorded
    clock.now = _at(10, 0, 2)
    (second,) = host.tick()
    assert second.occurrence == _night(2)
    assert host.finish(second) == "succeeded"
    host.ticker.run_ended(second)
    clock.now = _at(10, 1, 1)
    scheduled, third = host.tick()  # the minute's occurrence is due: claimed first, as always
    assert (scheduled.occurrence, third.occurrence) == (_at(10, 1), _night(3))


def test_a_backfill_yields_to_the_schedule_and_runs_up_to_its_concurrency(
    replicas: Any, clock: ManualClock
) -> None:
    clock.now = _at(2, 59, 30)
    (host,) = replicas([{"name": "sample.nightly", "cron": "0 3 * * *"}])  # overlap forbid
    backfill_id = _backfill(host, range(1, 5), concurrency=2)
    # Two at a time, the backfill's concurrency, though the job forbids overlap: the
    # backfill's runs do not count against each other.
    claims = host.tick()
    assert [(c.source, c.occurrence) for c in claims] == [
        ("backfill", _night(1)),
        ("backfill", _night(2)),
    ]
    # The night's own occurrence starts beside them: never skipped for overlap with them.
    clock.now = _at(3, 0, 1)
    (nightly,) = host.tick()
    assert (nightly.source, nightly.occurrence) == ("schedule", _at(3, 0))
    assert [host.finish(c) for c in claims] == ["succeeded", "succeeded"]
    # While the job's own run runs, the backfill yields (forbid); after it, it goes on.
    assert host.tick() == []
    assert host.finish(nightly) == "succeeded"
    clock.now += timedelta(seconds=1)
    assert [c.occurrence for c in host.tick()] == [_night(3), _night(4)]
    with reading(host.engine) as connection:
        skipped = connection.execute(select(runs.c.id).where(runs.c.outcome == "skipped")).all()
    assert skipped == []
    assert _record(host, backfill_id).counts == {"succeeded": 2, "claimed": 2}


def test_an_announced_host_goes_on_with_a_backfill_as_soon_as_the_run_it_yielded_to_ends(
    replicas: Any, clock: ManualClock
) -> None:
    clock.now = _at(2, 59, 59)
    (host,) = replicas([{"name": "sample.nightly", "cron": "0 3 * * *"}, EVERY_MINUTE])
    host.ticker._announced = True  # as a Host builds it
    _backfill(host, range(1, 3), concurrency=2)
    clock.now = _at(3, 0, 1)
    claims = {c.job_name: c for c, _ in host.ticker.tick(clock(), 8).claims}
    nightly, minutely = claims["sample.nightly"], claims["sample.minutely"]
    assert host.tick(6) == []  # it yields to the night's own run
    assert host.finish(minutely) == "succeeded"
    assert not host.ticker.run_ended(minutely)  # another job's end frees nothing for it
    assert host.tick(7) == []
    assert host.finish(nightly) == "succeeded"
    # The end of the run it yielded to: the next turn takes it up, not a second later.
    assert host.ticker.run_ended(nightly)
    backfilled = host.tick(8)
    assert [claim.occurrence for claim in backfilled] == [_night(1), _night(2)]


def test_a_backfill_retry_holds_no_lease_of_its_job(replicas: Any, clock: ManualClock) -> None:
    clock.now = _at(2, 59, 57)
    (host,) = replicas([FLAKY])  # overlap forbid
    _backfill(host, range(1, 2))
    (first,) = host.tick()
    assert host.finish(first) == "failed"
    clock.now = _at(2, 59, 59)
    (retry,) = host.tick()  # an ordinary claim takes the backfill's retry
    assert (retry.source, retry.backfill_id) == ("retry", first.backfill_id)
    query = select(schedules.c.lease_run_id, schedules.c.fencing_token)
    with reading(host.engine) as connection:
        lease_run_id, token = connection.execute(query).one()
    assert lease_run_id != retry.run_id and token == retry.fencing_token
    # The night's own occurrence starts beside it: never skipped for overlap with it.
    clock.now = _at(3, 0, 0)
    (nightly,) = host.tick()
    assert (nightly.source, nightly.occurrence) == ("schedule", _at(3, 0))
    assert nightly.fencing_token > retry.fencing_token


def test_a_backfilled_occurrence_has_a_retry_budget_of_its_own(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([BROKEN | {"max_attempts": 2, "backoff": "1s"}])
    clock.now = _at(10, 0, 1)
    # The night already failed both of its scheduled attempts.
    with host.engine.begin() as connection:
        connection.execute(
            runs.insert(),
            [
                {
                    "id": f"night-{attempt}",
                    "job_name": "sample.nightly",
                    "occurrence": _night(1),
                    "attempt": attempt,
                    "source": "schedule",
                    "outcome": "failed",
                    "queued_at": _night(1),
                    "started_at": _night(1),
                    "finished_at": _night(1),
                }
                for attempt in (1, 2)
            ],
        )
    backfill_id = _backfill(host, range(1, 2), mode="failed")
    (first,) = host.tick()
    assert (first.attempt, first.attempt_base) == (3, 2)
    assert host.finish(first) == "failed"
    # Its first attempt within the backfill failed: max_attempts = 2 gives it one more.
    clock.now += timedelta(seconds=2)
    (retry,) = host.tick()
    assert (retry.attempt, retry.attempt_base, retry.backfill_id) == (4, 2, backfill_id)
    assert host.finish(retry) == "failed"
    clock.now += timedelta(seconds=5)
    assert host.tick() == []
    record = _record(host, backfill_id)
    assert (record.counts, record.state) == ({"failed": 1}, "done")


def test_two_backfills_of_one_job_started_in_one_turn_take_distinct_tokens(
    replicas: Any, clock: ManualClock
) -> None:
    clock.now = _at(10, 0, 1)
    (host,) = replicas([NIGHTLY])
    first = _backfill(host, range(1, 3), concurrency=2)
    second = _backfill(host, range(3, 5), concurrency=2)
    claims = host.tick(slots=8)
    assert sorted((c.backfill_id, c.occurrence) for c in claims) == sorted(
        [(first, _night(1)), (first, _night(2)), (second, _night(3)), (second, _night(4))]
    )
    tokens = [c.fencing_token for c in claims]
    # Each start takes the job's next token, whichever backfill it belongs to: a token is
    # never handed out twice, and the schedule keeps the newest.
    assert len(set(tokens)) == len(tokens)
    with reading(host.engine) as connection:
        (stored,) = connection.execute(select(schedules.c.fencing_token)).one()
    assert stored == max(tokens)
