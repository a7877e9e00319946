"""A fan-out over 200 units survives ``kill -9`` of its host: another host finishes it.

Two real ``jobhost run`` processes share one PostgreSQL store; ``jobhost trigger`` starts the
fan-out once both are up (a schedule could pass while a loaded machine starts them). The host
running it is killed after about half the units; the survivor records the run abandoned,
retries it (the job retries on ``abandoned``) and does only the units not yet marked done.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.store import reading
from jobhost.store.schema import hosts, job_idempotency
from tests.process.conftest import ledger
from tests.support import run_jobhost
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

JOB = "sample.tenants"
UNITS = 200
CONCURRENCY = 4


def _live_hosts(engine: Engine) -> list[str]:
    with reading(engine) as connection:
        query = select(hosts.c.id).where(hosts.c.stopped_at.is_(None))
        return list(connection.execute(query).scalars())


def _unit_lines(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [
        (parts[0], parts[1])
        for parts in (line.split() for line in path.read_text().splitlines())
        if len(parts) == 3
    ]


def test_a_killed_fan_out_is_finished_by_another_host_each_unit_once(
    cluster: Any, tmp_path: Path
) -> None:
    job = {
        "name": JOB,
        "enabled": False,  # runs only when triggered
        "behaviour": "fan-out",
        "units": UNITS,
        "seconds": 0.08,
        "concurrency": CONCURRENCY,
        "max_attempts": 3,
        "retry_on": "failed,timed_out,abandoned",
        "backoff": "1s",
        "jitter": 0,
    }
    engine, replicas = cluster(
        [job],
        hosts=[{}, {}],
        lease_duration="3s",
        heartbeat_interval="1s",
        poll_interval="1s",
    )
    wait_for(lambda: len(_live_hosts(engine)) == 2, 60, "both hosts to register")
    queued = run_jobhost("--config", str(tmp_path / "jobhost.toml"), "trigger", JOB, "--no-wait")
    assert queued.returncode == 0, queued.stderr
    units_log = tmp_path / "runs.log.units"
    wait_for(lambda: len(_unit_lines(units_log)) >= UNITS // 2, 60, "half the units done")
    (running,) = [r for r in ledger(engine) if r.outcome == "running"]
    victim = next(r for r in replicas if r.host_id == running.host_id)
    survivor = next(r for r in replicas if r.host_id != running.host_id)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    done_before_kill = len(_unit_lines(units_log))
    assert done_before_kill < UNITS, "the fan-out finished before the kill; slow the units"

    retry = wait_for(
        lambda: [r for r in ledger(engine) if r.attempt == 2 and r.outcome == "succeeded"],
        60,
        "the survivor to finish the occurrence",
    )[0]
    rows = ledger(engine)
    first = next(r for r in rows if r.id == running.id)
    assert first.outcome == "abandoned"
    assert (first.source, retry.host_id, retry.source) == ("manual", survivor.host_id, "retry")
    assert retry.idempotency_key == first.idempotency_key
    assert [r for r in rows if r.attempt >= 1 and r.id not in {first.id, retry.id}] == []

    # Every unit is marked done exactly once, by one of the two runs.
    with reading(engine) as connection:
        marks = connection.execute(
            select(job_idempotency.c.key, job_idempotency.c.run_id).where(
                job_idempotency.c.job_name == JOB
            )
        ).all()
    assert len(marks) == UNITS
    by_run = Counter(run_id for _, run_id in marks)
    assert set(by_run) == {first.id, retry.id}
    units = retry.units
    assert units is not None
    assert (units.total, units.failed) == (UNITS, 0)
    # About half: the log line of a unit comes just before its mark, so a few may lag.
    assert units.skipped_already_done == by_run[first.id] >= UNITS // 2 - CONCURRENCY
    assert units.succeeded == by_run[retry.id]

    # The work: every unit done; only a unit in flight at the kill (done, not yet marked) may
    # have been done again by the survivor.
    lines = _unit_lines(units_log)
    times = Counter(unit for unit, _ in lines)
    assert set(times) == {f"tenant-{i:03d}" for i in range(UNITS)}
    again = {unit for unit, count in times.items() if count > 1}
    assert len(again) <= CONCURRENCY, again
    assert max(times.values()) <= 2
    assert all((unit, first.id) in lines and (unit, retry.id) in lines for unit in again)
    assert sum(1 for _, run_id in lines if run_id == retry.id) == units.succeeded
    print(f"killed after {done_before_kill} units; redone after the kill: {sorted(again)}")
    survivor.signal(signal.SIGTERM)
    assert survivor.wait(30) == 0, survivor.log()
