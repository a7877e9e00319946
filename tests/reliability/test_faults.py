"""Three replicas on PostgreSQL, ~37 fires/s (some runs always in flight), one killed with kill -9
and restarted, the database cut for 20 s: nothing runs twice, nothing is missed without a reason,
no outcome is lost, the audit agrees with the ledger, and memory stays flat."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.store.schema import hosts
from tests.reliability.harness import (
    Cluster,
    Memory,
    every_second_jobs,
    ledger,
    run_faults,
    slow_jobs,
    through_proxy,
)
from tests.reliability.proxy import CutProxy
from tests.reliability.verdict import judge, read_effects
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

JOBS = 36
FAULT_SECONDS = 75.0
OUTAGE_SECONDS = 20.0
CHURN_KILLS = 5


def test_kill_and_outage_lose_nothing_and_run_nothing_twice(
    postgres_url: str, store: Engine, proxy: CutProxy, make_cluster: Callable[..., Cluster]
) -> None:
    jobs = every_second_jobs(JOBS)
    cluster = make_cluster(
        through_proxy(postgres_url, proxy),
        [*jobs, *slow_jobs(4)],
        heartbeat_interval="1s",
        lease_duration="5s",
        shutdown_grace="5s",
    )
    for index in range(3):
        cluster.add(f"replica-{index}")
    wait_for(
        lambda: len({r.host_id for r in ledger(store)}) == 3, 60, "all three replicas to run jobs"
    )
    memory = Memory(cluster)
    first = _next_second(datetime.now(UTC))
    run_faults(
        cluster,
        proxy,
        FAULT_SECONDS,
        outage=OUTAGE_SECONDS,
        cycle=FAULT_SECONDS,
        every_second=memory.sample,
    )
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=3)
    memory.sample()
    crashed = [f"{r.host_id}:\n{r.log()[-2000:]}" for r in cluster.replicas if not r.alive]
    assert not crashed, "a replica exited during the faults:\n" + "\n".join(crashed)
    # The runs the killed replica left behind expire and are recorded by the survivors.
    wait_for(lambda: not _left_running(store, cluster), 30, "the killed replica's runs to settle")
    wait_for(lambda: _all_up(store, cluster), 60, "every replica's current process to be up")
    exits = cluster.stop()

    rows = ledger(store)
    verdict = judge(
        rows,
        read_effects(cluster.effects),
        jobs=[job["name"] for job in jobs],
        first=first,
        last=last,
        killed=cluster.killed(),
        logs=cluster.logs(),
    )
    report = "\n".join([*verdict.lines(), "memory:", *memory.lines()])
    print(report)  # shown with -s, and by pytest on a failure
    assert set(exits.values()) == {0}, f"exit codes after SIGTERM: {exits}"
    assert verdict.occurrences >= JOBS * (FAULT_SECONDS - 5), report
    assert verdict.executions > 0.5 * verdict.occurrences, report
    assert not verdict.duplicates, report
    assert not verdict.unexplained, report
    assert not verdict.outcomes_lost, report
    assert not verdict.audit_mismatches, report
    assert len(memory.samples) >= 4, report  # three replicas, one of them twice
    assert not memory.grown(allowed_mb=25, share=0.25, over=30), report


def _left_running(store: Engine, cluster: Cluster) -> list[str]:
    """Runs still ``running`` that started before the last kill: a dead process's, unsettled."""
    killed = cluster.killed()
    if not killed:
        return []
    last_kill = datetime.fromtimestamp(max(killed.values()), UTC)
    return [
        r.id
        for r in ledger(store)
        if r.outcome == "running" and r.started_at is not None and r.started_at < last_kill
    ]


def _all_up(store: Engine, cluster: Cluster) -> bool:
    """Every live replica's current process has registered: a SIGTERM before then (a process
    just restarted, still importing on a loaded machine) ends it before its handler is set,
    which is not the clean stop these tests judge."""
    with store.connect() as connection:
        rows = connection.execute(select(hosts.c.id, hosts.c.pid))
        registered = {host: pid for host, pid in rows}
    return all(registered.get(r.host_id) == r.pid for r in cluster.replicas if r.alive)


def _abandoned_slow_retried(store: Engine, slow: list[dict[str, Any]]) -> bool:
    rows = ledger(store)
    names = {job["name"] for job in slow}
    retried = {(r.job_name, r.occurrence) for r in rows if r.source == "retry"}
    abandoned = {
        (r.job_name, r.occurrence) for r in rows if r.outcome == "abandoned" and r.job_name in names
    }
    return abandoned <= retried


def _next_second(moment: datetime) -> datetime:
    return datetime.fromtimestamp(math.ceil(moment.timestamp()), UTC)


def test_restarts_under_the_same_ids_leave_no_run_of_a_dead_process_unsettled(
    postgres_url: str, store: Engine, make_cluster: Callable[..., Cluster]
) -> None:
    """Churn: every few seconds a replica is killed with kill -9 and restarted at once under its
    own id, long before its leases expire or its host row goes silent. Only the new process of
    that id can tell that the runs are dead: each is recorded abandoned, then retried."""
    jobs = every_second_jobs(8)
    slow = [{**job, "max_attempts": 2, "retry_on": "abandoned"} for job in slow_jobs(4)]
    cluster = make_cluster(
        postgres_url, [*jobs, *slow], heartbeat_interval="1s", lease_duration="60s"
    )
    for index in range(3):
        cluster.add(f"replica-{index}")
    wait_for(
        lambda: len({r.host_id for r in ledger(store)}) == 3, 60, "all three replicas to run jobs"
    )
    first = _next_second(datetime.now(UTC))
    for _ in range(CHURN_KILLS):
        time.sleep(5)  # the churn's pace, not a wait: a kill every few seconds of real load
        # The victim is a replica with a slow run in flight, so each kill leaves one behind.
        busy = wait_for(
            lambda: {r.host_id for r in ledger(store) if r.outcome == "running"}, 30, "a run"
        )
        victim = next(r for r in cluster.replicas if r.host_id in busy)
        victim.kill()
        victim.start()
    wait_for(
        lambda: not _left_running(store, cluster) and _abandoned_slow_retried(store, slow),
        30,
        "every run of a dead process to be settled, and the slow ones retried",
    )
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=3)
    wait_for(lambda: _all_up(store, cluster), 60, "every replica's current process to be up")
    exits = cluster.stop()

    rows = ledger(store)
    verdict = judge(
        rows,
        read_effects(cluster.effects),
        jobs=[job["name"] for job in jobs],
        first=first,
        last=last,
        killed=cluster.killed(),
        logs=cluster.logs(),
    )
    report = "\n".join(verdict.lines())
    print(report)
    assert set(exits.values()) == {0}, f"exit codes after SIGTERM: {exits}"
    assert not [r for r in rows if r.outcome == "running"], "runs of dead processes left running"
    abandoned = [r for r in rows if r.outcome == "abandoned"]
    assert abandoned, "no kill caught a run in flight; the churn proves nothing"
    assert all("restarted" in (r.error_message or "") for r in abandoned)
    retried = {(r.job_name, r.occurrence) for r in rows if r.source == "retry"}
    slow_names = {job["name"] for job in slow}
    assert {(r.job_name, r.occurrence) for r in abandoned if r.job_name in slow_names} <= retried
    assert not verdict.duplicates, report
    assert not verdict.unexplained, report
    assert not verdict.outcomes_lost, report
