"""Stuck code holds its worker only while its thread lives: once the thread ends, the slot is
the host's again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from jobhost.store import create_store_engine, upgrade
from tests.reliability.harness import Cluster
from tests.reliability.verdict import read_effects
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


def test_a_worker_held_by_stuck_code_is_free_again_once_the_code_returns(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    stuck = {
        "name": "rel.stuck",
        "cron": "* * * * * *",
        "behaviour": "stuck",
        "seconds": 4,
        "timeout": "1s",
    }
    # One worker: while the stuck code runs, nothing else can; after it, the next run must.
    cluster = make_cluster(
        f"sqlite:///{path}",
        [stuck],
        heartbeat_interval="1s",
        lease_duration="3s",
        shutdown_grace="1s",
        worker_pool_size="1",
    )
    engine = create_store_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    host = cluster.add("replica-0")

    def begun() -> list[str]:
        effects = read_effects(cluster.effects)
        return [e.run_id for e in effects if e.job == "rel.stuck" and e.event == "begin"]

    first = wait_for(begun, 60, "the stuck job to begin")[0]
    wait_for(
        lambda: [r for r in begun() if r != first],
        30,
        "a run to begin on the one worker after the stuck code returned",
    )
    host.stop(15)
