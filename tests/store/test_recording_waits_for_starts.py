"""Starting due runs comes first: while its host is behind on due runs, the recorder holds a
finished run's record until the host has caught up, never longer than its hold, and never at
shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from jobhost_contracts import Cancellation
from sqlalchemy import select

from jobhost.firing.recorder import Finished, OutcomeRecorder
from jobhost.store import reading
from jobhost.store.schema import runs
from tests.support import ManualClock
from tests.waiting import wait_for

JOB = {"name": "sample.every-second", "interval": "1s"}


def test_a_record_waits_while_the_host_is_behind_and_follows_once_it_caught_up(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    replica, finished = _finished_run(replicas, clock)
    behind = threading.Event()
    behind.set()
    recorded: list[Finished] = []
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, behind=behind.is_set, hold=60
    )
    recorder.start()
    try:
        recorder.put(finished)
        time.sleep(0.3)  # the recorder's thread has long taken the run by now
        assert recorded == []
        assert _outcome(replica.engine, finished) == "running"
        behind.clear()
        wait_for(lambda: recorded or None, 10, "the record once the host caught up")
        assert _outcome(replica.engine, finished) == "succeeded"
    finally:
        recorder.stop(within=5)


def test_a_host_that_stays_behind_still_records_within_the_hold(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    replica, finished = _finished_run(replicas, clock)
    recorded: list[Finished] = []
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, behind=lambda: True, hold=0.2
    )
    recorder.start()
    try:
        recorder.put(finished)
        wait_for(lambda: recorded or None, 10, "the record after the hold")
        assert _outcome(replica.engine, finished) == "succeeded"
    finally:
        recorder.stop(within=5)


def test_shutdown_records_at_once_what_the_hold_kept(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    replica, finished = _finished_run(replicas, clock)
    recorded: list[Finished] = []
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, behind=lambda: True, hold=60
    )
    recorder.start()
    recorder.put(finished)
    time.sleep(0.1)
    recorder.stop(within=5)  # gives up after 10 s: the hold's 60 would lose the run
    assert [f.claim.run_id for f in recorded] == [finished.claim.run_id]
    assert _outcome(replica.engine, finished) == "succeeded"


def _finished_run(replicas: Callable[..., list[Any]], clock: ManualClock) -> tuple[Any, Finished]:
    (replica,) = replicas([JOB])
    clock.advance(seconds=1)
    (claim,) = replica.tick()
    spec = replica.catalog.jobs[claim.job_name]
    executed = replica.envelope.execute(claim, spec, Cancellation())
    return replica, Finished(claim, spec, executed)


def _outcome(engine: Any, finished: Finished) -> str:
    with reading(engine) as connection:
        query = select(runs.c.outcome).where(runs.c.id == finished.claim.run_id)
        return str(connection.execute(query).scalar_one())
