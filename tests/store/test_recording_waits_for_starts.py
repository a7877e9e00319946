"""Starting due runs comes first: while its host is behind on due runs, the recorder holds a
finished run's record, but only until a moment before a claim would look at its job's row
again (the overlap rule reads the record there), never for a run without that instant, and
never longer than its longest hold."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from jobhost.config import Settings
from jobhost.envelope.envelope import SupervisedCancellation
from jobhost.envelope.lifecycle import Finished
from jobhost.firing.host import Host
from jobhost.firing.slots import OutcomeRecorder
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs
from tests.support import ManualClock, sample_catalog
from tests.waiting import wait_for

EVERY_SECOND = {"name": "sample.every-second", "cron": "* * * * * *"}
GROUPED = {"name": "sample.grouped", "cron": "* * * * * *", "concurrency_group": "warehouse"}
START = datetime(2026, 5, 4, 10, 0, 0, tzinfo=UTC)


def test_a_scheduled_run_is_recorded_by_its_jobs_next_occurrence_and_no_other_run_waits(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    (replica,) = replicas([EVERY_SECOND, GROUPED], concurrency_limits={"warehouse": 4})
    clock.now = START + timedelta(seconds=1)
    claims = {c.job_name: c for c in replica.tick()}
    assert claims["sample.every-second"].record_by == START + timedelta(seconds=2)
    # Other jobs' claims count a grouped job's live runs: its record never waits.
    assert claims["sample.grouped"].record_by is None
    for claim in claims.values():
        replica.finish(claim)
    with replica.engine.begin() as connection:
        request_run(connection, "sample.every-second", "ops", None, clock())
    (manual,) = replica.tick()
    assert (manual.source, manual.record_by) == ("manual", None)


def test_a_record_waits_while_it_may_and_is_written_once_it_may_not(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    replica, finished = _finished_run(replicas, clock)
    hold = threading.Event()
    hold.set()
    asked: list[datetime] = []

    def may_hold(by: datetime) -> bool:
        asked.append(by)
        return hold.is_set()

    recorded: list[Finished] = []
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, may_hold=may_hold
    )
    recorder.start()
    try:
        recorder.put(finished)
        wait_for(lambda: asked, 10, "the recorder to ask whether it may hold")
        time.sleep(0.1)
        assert recorded == []
        assert _outcome(replica.engine, finished) == "running"
        assert set(asked) == {finished.claim.record_by}
        hold.clear()
        wait_for(lambda: recorded or None, 10, "the record once it may not wait")
        assert _outcome(replica.engine, finished) == "succeeded"
    finally:
        recorder.stop(within=5)


def test_a_record_is_held_for_a_moment_at_most_and_written_at_shutdown(
    replicas: Callable[..., list[Any]], clock: ManualClock
) -> None:
    replica, finished = _finished_run(replicas, clock)
    recorded: list[Finished] = []
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, may_hold=lambda _by: True
    )
    recorder.start()
    try:
        recorder.put(finished)
        wait_for(lambda: recorded or None, 10, "the record after the longest hold")
        assert _outcome(replica.engine, finished) == "succeeded"
    finally:
        recorder.stop(within=5)
    clock.advance(seconds=1)
    finished = _finish(replica)
    recorded.clear()
    recorder = OutcomeRecorder(
        envelope=replica.envelope, on_recorded=recorded.append, may_hold=lambda _by: True
    )
    recorder.start()
    recorder.put(finished)
    recorder.stop(within=5)
    assert [f.claim.run_id for f in recorded] == [finished.claim.run_id]
    assert _outcome(replica.engine, finished) == "succeeded"


def test_a_host_holds_a_record_only_while_behind_and_well_before_its_jobs_next_look(
    tmp_path: Any, clock: ManualClock, telemetry: Any
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/store.db", plugins=[])
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(
        settings, sample_catalog(settings), Store(engine), clock=clock, telemetry=telemetry[0]
    )
    try:
        by = START + timedelta(seconds=1)
        clock.now = START
        assert not host._may_hold(by), "a host that keeps up writes at once"
        host.slots.turned(True, set())  # the last turn left due runs for want of a worker
        assert host._may_hold(by)
        clock.now = by - timedelta(milliseconds=250)
        assert not host._may_hold(by), "a claim may look at the job's row soon"
    finally:
        engine.dispose()


def _finished_run(replicas: Callable[..., list[Any]], clock: ManualClock) -> tuple[Any, Finished]:
    (replica,) = replicas([EVERY_SECOND])
    clock.now = START + timedelta(seconds=1)
    return replica, _finish(replica)


def _finish(replica: Any) -> Finished:
    """The run due now, executed and not yet recorded."""
    (claim,) = replica.tick()
    spec = replica.catalog.jobs[claim.job_name]
    return replica.envelope.execute(
        claim, spec, SupervisedCancellation(), on_stuck=lambda _verdict: None
    )


def _outcome(engine: Any, finished: Finished) -> str:
    with reading(engine) as connection:
        query = select(runs.c.outcome).where(runs.c.id == finished.claim.run_id)
        return str(connection.execute(query).scalar_one())
