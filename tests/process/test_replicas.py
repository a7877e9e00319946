"""Several real hosts on one PostgreSQL store: exactly once, dead hosts, wrong clocks, shutdown."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from jobhost.records import HostRecord
from jobhost.store import reading
from jobhost.store.schema import hosts
from tests.process.conftest import ledger
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_three_hosts_run_every_occurrence_of_thirty_jobs_exactly_once(cluster: Any) -> None:
    jobs = [{"name": f"sample.every-second-{i:02d}", "cron": "* * * * * *"} for i in range(30)]
    engine, replicas = cluster(jobs, hosts=[{}, {}, {}], heartbeat_interval="1s")
    wait_for(lambda: len({r.host_id for r in ledger(engine)}) == 3, 30, "all three hosts to run")
    wait_for(lambda: _span(ledger(engine)) >= 13, 60, "13 seconds of occurrences")
    for replica in replicas:
        replica.signal(signal.SIGTERM)
    for replica in replicas:
        assert replica.wait(30) == 0, replica.log()
    rows = ledger(engine)
    first_second = min(r.occurrence for r in rows if r.occurrence) + timedelta(seconds=3)
    last_second = max(r.occurrence for r in rows if r.occurrence) - timedelta(seconds=3)
    window = [r for r in rows if r.occurrence and first_second <= r.occurrence <= last_second]
    seconds = int((last_second - first_second).total_seconds()) + 1
    assert seconds >= 7
    per_occurrence = Counter((r.job_name, r.occurrence) for r in window)
    assert len(per_occurrence) == 30 * seconds, "an occurrence in the window has no row"
    assert set(per_occurrence.values()) == {1}, "an occurrence has more than one row"
    assert {r.outcome for r in window} == {"succeeded"}
    assert len({r.host_id for r in window}) == 3


def test_a_killed_hosts_run_is_abandoned_and_a_survivor_runs_the_next(cluster: Any) -> None:
    job = {"name": "sample.slow", "cron": "*/4 * * * * *", "behaviour": "sleep", "seconds": 3}
    engine, replicas = cluster([job], hosts=[{}, {}], lease_duration="3s", heartbeat_interval="1s")
    running = wait_for(
        lambda: [r for r in ledger(engine) if r.outcome == "running"], 30, "a running run"
    )[0]
    victim = next(r for r in replicas if r.host_id == running.host_id)
    survivor = next(r for r in replicas if r.host_id != running.host_id)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    abandoned = wait_for(
        lambda: [r for r in ledger(engine) if r.id == running.id and r.outcome == "abandoned"],
        15,
        "the killed host's run to be recorded abandoned",
    )[0]
    assert "stopped renewing" in (abandoned.error_message or "")
    # The wait is the assertion: it fails unless the survivor runs a later occurrence.
    wait_for(
        lambda: [
            r
            for r in ledger(engine)
            if r.occurrence
            and running.occurrence
            and r.occurrence > running.occurrence
            and r.host_id == survivor.host_id
            and r.attempt == 1
        ],
        15,
        "the survivor to run a later occurrence",
    )


def test_a_host_with_a_fast_clock_runs_nothing_early_and_nothing_twice(cluster: Any) -> None:
    # One worker a host and two runs of a second due at once: whichever host claims first
    # has no worker for the second, so the fast host runs at every occurrence, not only when
    # it happens to win the first claim (a host that keeps up would otherwise keep it all).
    jobs = [
        {"name": f"sample.tick-{i}", "cron": "*/2 * * * * *", "behaviour": "sleep", "seconds": 1}
        for i in range(2)
    ]
    engine, replicas = cluster(
        jobs,
        hosts=[{"JOBHOST_CLOCK_OFFSET": "30s"}, {}],
        heartbeat_interval="1s",
        worker_pool_size="1",
    )
    fast = replicas[0]
    wait_for(
        lambda: any(r.host_id == fast.host_id for r in ledger(engine)), 30, "the fast host to run"
    )
    wait_for(
        lambda: len({(r.job_name, r.occurrence) for r in ledger(engine) if r.attempt == 1}) >= 8,
        30,
        "four occurrences of each job",
    )
    for replica in replicas:
        replica.signal(signal.SIGTERM)
        replica.wait(30)
    rows = [r for r in ledger(engine) if r.attempt == 1]
    assert all(r.started_at and r.occurrence and r.started_at >= r.occurrence for r in rows)
    assert max(Counter((r.job_name, r.occurrence) for r in rows).values()) == 1
    with reading(engine) as connection:
        records = [HostRecord.from_row(h) for h in connection.execute(select(hosts)).mappings()]
    skew = {h.id: h.clock_skew_seconds for h in records}
    assert 29 < skew[fast.host_id] < 31
    assert abs(skew[replicas[1].host_id]) < 1


def test_sigterm_cancels_the_run_releases_the_lease_and_another_host_goes_on(
    cluster: Any,
) -> None:
    job = {"name": "sample.long", "cron": "*/3 * * * * *", "behaviour": "sleep", "seconds": 60}
    engine, replicas = cluster([job], hosts=[{}, {}], shutdown_grace="10s", heartbeat_interval="1s")
    running = wait_for(
        lambda: [r for r in ledger(engine) if r.outcome == "running"], 30, "a running run"
    )[0]
    stopping = next(r for r in replicas if r.host_id == running.host_id)
    other = next(r for r in replicas if r.host_id != running.host_id)
    stopping.signal(signal.SIGTERM)
    assert stopping.wait(15) == 0
    (cancelled,) = [r for r in ledger(engine) if r.id == running.id]
    assert cancelled.outcome == "cancelled"
    # The executor's own answer to the cancellation, not the host giving up on it after the
    # grace ("the executor did not stop within 10s"): shutdown asked, the run stopped.
    assert cancelled.error_message == "stopped early", cancelled.error_message
    later = wait_for(
        lambda: [
            r
            for r in ledger(engine)
            if r.host_id == other.host_id and r.attempt == 1 and r.outcome == "running"
        ],
        15,
        "the other host to run the next occurrence",
    )
    assert later[0].occurrence and running.occurrence and later[0].occurrence > running.occurrence


def test_a_pending_retry_survives_a_restart_and_any_replica_takes_it(cluster: Any) -> None:
    job = {
        "name": "sample.flaky",
        "cron": "*/5 * * * * *",
        "behaviour": "fail-once",
        "max_attempts": 2,
        "backoff": "4s",
    }
    engine, (first,) = cluster([job], hosts=[{"JOBHOST_HOST_ID": "first"}], heartbeat_interval="1s")
    wait_for(lambda: [r for r in ledger(engine) if r.outcome == "pending"], 30, "a pending retry")
    first.signal(signal.SIGTERM)
    assert first.wait(15) == 0
    _, (_second,) = cluster([job], hosts=[{"JOBHOST_HOST_ID": "second"}], heartbeat_interval="1s")
    retried = wait_for(
        lambda: [r for r in ledger(engine) if r.attempt == 2 and r.outcome == "succeeded"],
        20,
        "the retry to succeed on the second host",
    )[0]
    assert (retried.host_id, retried.source) == ("second", "retry")
    (failed,) = [r for r in ledger(engine) if r.attempt == 1 and r.occurrence == retried.occurrence]
    assert failed.outcome == "failed" and failed.idempotency_key == retried.idempotency_key


def _span(rows: list[Any]) -> float:
    """Seconds between the first and the last occurrence in ``rows``."""
    occurrences = [r.occurrence for r in rows if r.occurrence]
    return (max(occurrences) - min(occurrences)).total_seconds() if occurrences else 0.0
