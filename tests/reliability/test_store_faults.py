"""Faults on PostgreSQL, one at a time: a statement that fails for one job, an outcome finished
while the database is away, a run abandoned by a dead host, a host frozen past its lease."""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.reliability.harness import (
    Cluster,
    Replica,
    every_second_jobs,
    ledger,
    through_proxy,
)
from tests.reliability.proxy import CutProxy
from tests.reliability.verdict import audit_mismatches, judge, read_effects, recorded
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FAST = {"heartbeat_interval": "1s", "lease_duration": "3s", "shutdown_grace": "3s"}

_POISON = """
CREATE FUNCTION rel_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rel_poison: statement refused for %', NEW.job_name;
END $$;
CREATE TRIGGER rel_poison BEFORE UPDATE ON schedules FOR EACH ROW
    WHEN (NEW.job_name = 'rel.poisoned') EXECUTE FUNCTION rel_poison();
"""


def test_a_statement_failing_for_one_job_stalls_no_other_and_loses_no_claim(
    postgres_url: str, store: Engine, make_cluster: Callable[..., Cluster]
) -> None:
    jobs = [*every_second_jobs(8), {"name": "rel.poisoned", "cron": "* * * * * *"}]
    cluster = make_cluster(postgres_url, jobs, **FAST)
    host = cluster.add("replica-0")
    wait_for(
        lambda: {r.job_name for r in ledger(store)} >= {j["name"] for j in jobs},
        60,
        "every job to run once",
    )
    with store.begin() as connection:
        connection.execute(text(_POISON))
    first = _second_after(datetime.now(UTC), 2)
    wait_for(
        lambda: _latest_occurrence(store) >= first + timedelta(seconds=15),
        45,
        "fifteen seconds of occurrences after the poisoned row",
    )
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    assert host.alive, host.log()[-3000:]
    effects = read_effects(cluster.effects)
    rows = wait_for(lambda: recorded(ledger(store), effects), 15, "completed runs recorded")
    verdict = judge(
        rows,
        effects,
        jobs=[j["name"] for j in jobs if j["name"] != "rel.poisoned"],
        first=first,
        last=last,
        killed={},
    )
    abandoned = [
        f"{r.job_name} {r.occurrence}: {r.error_message}" for r in rows if r.outcome == "abandoned"
    ]
    report = "\n".join([*verdict.lines(), "abandoned while the host lived:", *abandoned])
    assert not verdict.unexplained, report
    assert not verdict.misses_by_reason, report  # the other jobs ran every second
    assert not abandoned, report
    assert not verdict.outcomes_lost, report


def test_an_outcome_finished_during_an_outage_is_written_when_the_store_returns(
    postgres_url: str, store: Engine, proxy: CutProxy, make_cluster: Callable[..., Cluster]
) -> None:
    job = {"name": "rel.slow", "cron": "*/10 * * * * *", "behaviour": "sleep", "seconds": 3}
    cluster = make_cluster(through_proxy(postgres_url, proxy), [job], **FAST)
    host = cluster.add("replica-0")
    running = wait_for(
        lambda: [r for r in ledger(store) if r.outcome == "running"], 40, "a running run"
    )[0]
    proxy.cut()
    # The executor finishes 3 s into the run, while the store is away; the host tries to record
    # it, fails, and keeps the outcome.
    wait_for(
        lambda: (
            any(e.run_id == running.id and e.event == "end" for e in read_effects(cluster.effects))
            and "finished run(s) failed" in host.log()
        ),
        40,
        "the run to end and its recording to fail while the store is away",
    )
    proxy.restore()
    finished = wait_for(
        lambda: [r for r in ledger(store) if r.id == running.id and r.outcome != "running"],
        20,
        "the run to get an outcome",
    )[0]
    ended = [
        e for e in read_effects(cluster.effects) if e.run_id == running.id and e.event == "end"
    ]
    assert ended, "the executor did not complete"
    assert host.alive
    assert finished.outcome == "succeeded", (
        f"run {running.id} completed during the outage but the ledger says {finished.outcome}: "
        f"{finished.error_message}\n" + _lines_about(host.log(), running.id)
    )


def test_a_run_abandoned_by_a_dead_host_is_retried_per_its_retry_policy(
    postgres_url: str, store: Engine, make_cluster: Callable[..., Cluster]
) -> None:
    job = {
        "name": "rel.retried",
        "cron": "*/10 * * * * *",
        "behaviour": "sleep-first",
        "seconds": 60,
        "max_attempts": 2,
        "backoff": "1s",
    }
    cluster = make_cluster(postgres_url, [job], **FAST)
    replicas = [cluster.add("replica-0"), cluster.add("replica-1")]
    running = wait_for(
        lambda: [r for r in ledger(store) if r.outcome == "running"], 40, "a running run"
    )[0]
    victim = next(r for r in replicas if r.host_id == running.host_id)
    victim.kill()
    wait_for(
        lambda: [r for r in ledger(store) if r.id == running.id and r.outcome == "abandoned"],
        15,
        "the dead host's run to be recorded abandoned",
    )
    wait_for(
        lambda: [
            r
            for r in ledger(store)
            if r.occurrence == running.occurrence and r.attempt == 2 and r.outcome == "succeeded"
        ],
        15,
        f"a second attempt at occurrence {running.occurrence} (max_attempts=2) to succeed",
    )
    attempts = sorted(
        (r.attempt, r.outcome) for r in ledger(store) if r.occurrence == running.occurrence
    )
    assert attempts == [(1, "abandoned"), (2, "succeeded")]


def test_the_audit_outcome_is_the_ledger_outcome_for_a_host_frozen_past_its_lease(
    postgres_url: str, store: Engine, make_cluster: Callable[..., Cluster]
) -> None:
    job = {"name": "rel.frozen", "cron": "*/10 * * * * *", "behaviour": "sleep", "seconds": 4}
    cluster = make_cluster(postgres_url, [job], **FAST)
    replicas = [cluster.add("replica-0"), cluster.add("replica-1")]
    running = wait_for(
        lambda: [r for r in ledger(store) if r.outcome == "running"], 40, "a running run"
    )[0]
    frozen = next(r for r in replicas if r.host_id == running.host_id)
    frozen.signal(signal.SIGSTOP)
    try:
        try:
            wait_for(
                lambda: [r for r in ledger(store) if r.id == running.id and r.outcome != "running"],
                20,
                "the other replica to record the frozen host's run",
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{_takeover_state(store, cluster, frozen)}") from None
    finally:
        frozen.signal(signal.SIGCONT)
    wait_for(lambda: f'"run_id": "{running.id}"' in cluster.logs(), 20, "an audit line")
    # The thawed host's executor ends, and the host records what it saw: the ledger's word.
    wait_for(
        lambda: f"run {running.id} finished" in frozen.log() and "already says" in frozen.log(),
        20,
        "the thawed host to learn its run was recorded by another",
    )
    mismatches = audit_mismatches(ledger(store), cluster.logs())
    assert not mismatches, "\n".join([*mismatches, _lines_about(frozen.log(), running.id)])


@pytest.mark.parametrize(
    ("lease", "settings"),
    [
        (None, FAST),
        # The job's own lease, far shorter than the hosts' default: the server ends the idle
        # transaction after the job's lease, not after a minute.
        ("3s", {**FAST, "lease_duration": "60s"}),
    ],
    ids=["hosts-lease", "jobs-own-lease"],
)
def test_a_host_frozen_inside_a_transaction_does_not_keep_its_run_from_the_other_replica(
    postgres_url: str,
    store: Engine,
    make_cluster: Callable[..., Cluster],
    lease: str | None,
    settings: dict[str, str],
) -> None:
    # A host frozen between two statements of its lease renewal holds the run's row locked,
    # and every other replica's claim and abandon pass skip locked rows. The freeze is made to
    # land there: the renewal waits for this test's lock on the job's schedule row (after it
    # has written the run's row), the host is frozen, and the lock is let go.
    job = {"name": "rel.frozen", "cron": "*/10 * * * * *", "behaviour": "sleep", "seconds": 4}
    if lease is not None:
        job["lease"] = lease
    cluster = make_cluster(postgres_url, [job], **settings)
    replicas = [cluster.add("replica-0"), cluster.add("replica-1")]
    running = wait_for(
        lambda: [r for r in ledger(store) if r.outcome == "running"], 40, "a running run"
    )[0]
    frozen = next(r for r in replicas if r.host_id == running.host_id)
    with store.connect() as blocker:
        blocker.execute(
            text("SELECT 1 FROM schedules WHERE job_name = :job FOR UPDATE"), {"job": job["name"]}
        )
        me = blocker.execute(text("SELECT pg_backend_pid()")).scalar_one()
        wait_for(lambda: _renewals_blocked_by(store, me), 20, "a lease renewal to wait for us")
        frozen.signal(signal.SIGSTOP)
        blocker.rollback()
    try:
        wait_for(lambda: _idle_in_transaction(store), 20, "the renewal to go idle")
        wait_for(
            lambda: [r for r in ledger(store) if r.id == running.id and r.outcome != "running"],
            20,
            "the other replica to record the run of the host frozen in a transaction",
        )
    finally:
        frozen.signal(signal.SIGCONT)
    (recorded_run,) = [r for r in ledger(store) if r.id == running.id]
    assert recorded_run.outcome == "abandoned", recorded_run
    wait_for(
        lambda: f"run {running.id} finished" in frozen.log() and "already says" in frozen.log(),
        20,
        "the thawed host to learn its run was recorded by another",
    )
    assert frozen.alive, frozen.log()[-3000:]


def _takeover_state(store: Engine, cluster: Cluster, frozen: Replica) -> str:
    """What a failed takeover is told by: the sessions in a transaction (their locks hide rows
    from the other replica), the runs, and what the other replicas logged."""
    with store.connect() as connection:
        sessions = connection.execute(
            text(
                "SELECT pid, state, now() - xact_start AS open_for, left(query, 80) "
                "FROM pg_stat_activity WHERE xact_start IS NOT NULL "
                "AND pid <> pg_backend_pid()"
            )
        ).all()
        rows = connection.execute(
            text("SELECT id, outcome, host_id, lease_expires_at, now() FROM runs")
        ).all()
    others = [r.log()[-2000:] for r in cluster.replicas if r is not frozen]
    return "\n".join(
        ["sessions in a transaction:", *map(str, sessions), "runs:", *map(str, rows), *others]
    )


def _renewals_blocked_by(store: Engine, pid: int) -> list[int]:
    with store.connect() as connection:
        return list(
            connection.execute(
                text(
                    "SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l USING (pid) "
                    "WHERE :me = ANY(pg_blocking_pids(a.pid)) "
                    "AND a.query LIKE 'UPDATE schedules SET lease_expires_at%' "
                    "AND l.relation = 'runs'::regclass AND l.mode = 'RowExclusiveLock'"
                ),
                {"me": pid},
            ).scalars()
        )


def _idle_in_transaction(store: Engine) -> bool:
    """Some session holds the run's row locked, with no statement running."""
    with store.connect() as connection:
        return bool(
            connection.execute(
                text(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.relation = 'runs'::regclass AND a.state = 'idle in transaction'"
                )
            ).scalar_one()
        )


def _ended(cluster: Cluster, run_id: str) -> bool:
    return any(e.run_id == run_id and e.event == "end" for e in read_effects(cluster.effects))


def _latest_occurrence(store: Engine) -> datetime:
    occurrences = [r.occurrence for r in ledger(store) if r.occurrence]
    return max(occurrences, default=datetime.min.replace(tzinfo=UTC))


def _second_after(moment: datetime, seconds: int) -> datetime:
    return moment.replace(microsecond=0) + timedelta(seconds=seconds)


def _lines_about(log: str, run_id: str) -> str:
    return "\n".join(line[:300] for line in log.splitlines() if run_id in line)
