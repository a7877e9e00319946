"""Stuck code holds its worker only while it runs: once it returns, the slot is the host's again;
should it never return, the host still stops."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobhost.store import create_store_engine
from tests.reliability.harness import Cluster, ledger
from tests.reliability.stuck_support import FAST, STUCK, migrated, stuck_effects, stuck_job
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


def test_a_host_whose_worker_is_held_by_code_that_never_returns_still_stops_in_its_grace(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    cluster = make_cluster(f"sqlite:///{path}", [stuck_job(600)], **FAST)
    migrated(path).dispose()
    host = cluster.add("replica-0")
    wait_for(lambda: stuck_effects(cluster), 60, "the stuck job to begin")
    engine = create_store_engine(f"sqlite:///{path}")
    try:
        (stuck,) = wait_for(
            lambda: [r for r in ledger(engine) if (r.error_message or "").startswith("stuck:")],
            15,
            "the run past its timeout to be marked stuck",
        )
        stopping = time.monotonic()
        code = host.stop(20)
        took = time.monotonic() - stopping
        # The worker runs the stuck code on its own thread: a thread the interpreter joined at
        # exit would keep the process alive for the code's 600 s, and the stop would kill it.
        assert code == 0, f"exit code {code} after {took:.1f}s\n{host.log()[-3000:]}"
        assert took < 15, f"stopping took {took:.1f}s"
        (row,) = [r for r in ledger(engine) if r.id == stuck.id]
        assert row.job_name == STUCK
        assert (row.outcome, row.error_type) == ("cancelled", "Shutdown")
    finally:
        engine.dispose()
