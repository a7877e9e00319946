"""Stuck code holds its worker only while its thread lives: once the thread ends, the slot is
the host's again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.harness import Cluster
from tests.reliability.stuck_support import FAST, migrated, stuck_effects, stuck_job
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


def test_a_worker_held_by_stuck_code_is_free_again_once_the_code_returns(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    # One worker: while the stuck code runs, nothing else can; after it, the next run must.
    cluster = make_cluster(f"sqlite:///{path}", [stuck_job(4)], **FAST, worker_pool_size="1")
    migrated(path).dispose()
    host = cluster.add("replica-0")

    def begun() -> list[str]:
        return [e.run_id for e in stuck_effects(cluster) if e.event == "begin"]

    first = wait_for(begun, 60, "the stuck job to begin")[0]
    wait_for(
        lambda: [r for r in begun() if r != first],
        30,
        "a run to begin on the one worker after the stuck code returned",
    )
    host.stop(15)
