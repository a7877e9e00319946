"""A host killed with ``kill -9`` and started again under the same host id settles its runs.

A run belongs to the process that claimed it. The new process of the id records the dead one's
runs abandoned and applies their jobs' retry policies: a fan-out's retry does only the units the
dead process had not marked done. A second process claiming the id of a live one is refused.
Real ``jobhost run`` processes, one host only, so no other replica could settle the runs.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from jobhost.store import reading
from jobhost.store.schema import hosts, job_idempotency
from tests.process.conftest import ledger, store_url
from tests.support import run_jobhost
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

JOB = "sample.tenants"
UNITS = 80
HOST = "pod-0"
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("store", STORES)
def test_a_restart_under_the_same_id_settles_the_dead_process_runs_and_resumes_its_fan_out(
    cluster: Any, tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    url = store_url(store, tmp_path, request)
    job = {
        "name": JOB,
        "enabled": False,  # runs only when triggered
        "behaviour": "fan-out",
        "units": UNITS,
        "seconds": 0.3,
        "concurrency": 2,
        "max_attempts": 3,
        "retry_on": "failed,timed_out,abandoned",
        "backoff": "1s",
        "jitter": 0,
    }
    settings = {"lease_duration": "3s", "heartbeat_interval": "1s", "poll_interval": "1s"}
    engine, (first,) = cluster([job], hosts=[{"JOBHOST_HOST_ID": HOST}], store_url=url, **settings)
    wait_for(lambda: _host_started(engine), 60, "the host to register")
    queued = run_jobhost("--config", str(tmp_path / "jobhost.toml"), "trigger", JOB, "--no-wait")
    assert queued.returncode == 0, queued.stderr
    units_log = tmp_path / "runs.log.units"
    wait_for(lambda: len(_unit_lines(units_log)) >= UNITS // 5, 60, "a fifth of the units")
    (running,) = [r for r in ledger(engine) if r.outcome == "running"]

    # A second process under the id of a live one is refused, and touches nothing.
    _, (twin,) = cluster(None, hosts=[{"JOBHOST_HOST_ID": HOST}])
    assert twin.wait(60) != 0
    assert "in use by a live host" in twin.log()

    first.signal(signal.SIGKILL)
    first.wait(10)
    done_before_kill = len(_unit_lines(units_log))
    assert done_before_kill < UNITS, "the fan-out finished before the kill; slow the units"
    _, (again,) = cluster(None, hosts=[{"JOBHOST_HOST_ID": HOST}])

    retry = wait_for(
        lambda: [r for r in ledger(engine) if r.attempt == 2 and r.outcome == "succeeded"],
        90,
        "the restarted process to settle the dead run and finish it",
    )[0]
    dead = next(r for r in ledger(engine) if r.id == running.id)
    assert (dead.outcome, dead.host_id) == ("abandoned", HOST)
    assert "restarted" in (dead.error_message or "")
    assert (retry.host_id, retry.source, retry.idempotency_key) == (
        HOST,
        "retry",
        dead.idempotency_key,
    )
    assert [r for r in ledger(engine) if r.outcome == "running"] == []

    with reading(engine) as connection:
        marks = connection.execute(
            select(job_idempotency.c.run_id).where(job_idempotency.c.job_name == JOB)
        ).scalars()
        by_run = Counter(marks)
    assert sum(by_run.values()) == UNITS
    units = retry.units
    assert units is not None
    assert (units.total, units.failed) == (UNITS, 0)
    assert units.skipped_already_done == by_run[dead.id] > 0
    assert units.succeeded == by_run[retry.id] < UNITS

    health = run_jobhost("--config", str(tmp_path / "jobhost.toml"), "health", "--json")
    checks = {c["name"]: c["ok"] for c in json.loads(health.stdout)["checks"]}
    assert checks["leases"] is True, health.stdout
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0, again.log()


def _host_started(engine: Any) -> bool:
    with reading(engine) as connection:
        return connection.execute(select(hosts.c.synced_at)).scalar() is not None


def _unit_lines(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [
        (parts[0], parts[1])
        for parts in (line.split() for line in path.read_text().splitlines())
        if len(parts) == 3
    ]
