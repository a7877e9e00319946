"""A 50-occurrence backfill survives ``kill -9`` of the host running it: each night runs once.

Two real ``jobhost run`` processes share one PostgreSQL store; ``jobhost backfill --no-wait``
records the backfill once both are up. The host running one of its runs is killed; the
survivor records that run abandoned, retries it (the job retries on ``abandoned``) and claims
the rest. Every occurrence ends with exactly one success for the backfill and no occurrence is
started twice by the backfill itself.
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
from jobhost.store.schema import backfills, hosts
from tests.process.conftest import ledger
from tests.support import run_jobhost
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

JOB = "sample.nightly"
NIGHTS = 50


def _live_hosts(engine: Engine) -> list[str]:
    with reading(engine) as connection:
        query = select(hosts.c.id).where(hosts.c.stopped_at.is_(None))
        return list(connection.execute(query).scalars())


def _state(engine: Engine, backfill_id: str) -> str:
    with reading(engine) as connection:
        query = select(backfills.c.state).where(backfills.c.id == backfill_id)
        return str(connection.execute(query).scalar_one())


def test_a_killed_backfill_goes_on_on_the_other_host_each_night_once(
    cluster: Any, tmp_path: Path
) -> None:
    job = {
        "name": JOB,
        "cron": "0 3 * * *",
        "behaviour": "sleep",
        "seconds": 1.0,
        "overlap": "allow",
        "max_concurrent": 2,
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
    started = run_jobhost(
        "--config", str(tmp_path / "jobhost.toml"), "backfill", JOB,
        "--from", "2026-09-01", "--to", "2026-10-21", "--mode", "all",
        "--concurrency", "2", "--no-wait", "--reason", "replay",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    (backfill_id,) = started.stdout.split()

    def replayed() -> list[Any]:
        return [r for r in ledger(engine) if r.backfill_id == backfill_id]

    wait_for(
        lambda: sum(1 for r in replayed() if r.outcome == "succeeded") >= 10,
        90,
        "ten nights replayed",
    )
    in_flight = wait_for(
        lambda: [r for r in replayed() if r.outcome == "running"], 30, "a run in flight"
    )
    # The newest: it has the most of its second left when the kill lands.
    running = max(in_flight, key=lambda r: r.started_at)
    victim = next(r for r in replicas if r.host_id == running.host_id)
    survivor = next(r for r in replicas if r.host_id != running.host_id)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    wait_for(lambda: _state(engine, backfill_id) == "done", 180, "the backfill to finish")

    rows = replayed()
    succeeded = Counter(r.occurrence for r in rows if r.outcome == "succeeded")
    assert len(succeeded) == NIGHTS
    assert set(succeeded.values()) == {1}, "an occurrence succeeded twice in one backfill"
    # The backfill started each night once; only the killed run's night has a retry.
    first_attempts = Counter(r.occurrence for r in rows if r.source == "backfill")
    assert len(first_attempts) == NIGHTS and set(first_attempts.values()) == {1}
    abandoned = [r for r in rows if r.outcome == "abandoned"]
    assert running.id in {r.id for r in abandoned}
    retried = {r.occurrence for r in rows if r.source == "retry"}
    assert retried == {r.occurrence for r in abandoned}
    assert {r.idempotency_key for r in rows if r.occurrence == running.occurrence} == {
        f"{JOB}:{running.occurrence:%Y-%m-%dT%H:%M:%SZ}:backfill:{backfill_id}"
    }
    after = [r for r in rows if r.started_at and r.started_at > running.started_at]
    assert any(r.host_id == survivor.host_id for r in after)
    # The executor saw each night once, the killed one at most twice.
    seen = Counter(
        line.split()[2]
        for line in (tmp_path / "runs.log").read_text().splitlines()
        if line.split()[4] in {"backfill", "retry"}
    )
    assert len(seen) == NIGHTS
    assert max(seen.values()) <= 2
    assert sum(seen.values()) == NIGHTS + len(abandoned)
    survivor.signal(signal.SIGTERM)
    assert survivor.wait(30) == 0, survivor.log()
