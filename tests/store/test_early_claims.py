"""A host that keeps up claims an occurrence just before its instant and starts it at it.

Its claim is a transaction of several statements, and a run starts only once it committed: woken
at the instant, the host would start every run a claim's length late. So a turn may also take
the occurrences of the next moments, each to start at its own instant; only one that would run
as things stand is taken early, anything else is left to the claim at its instant.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from jobhost.config import Settings
from jobhost.envelope.lifecycle import Finished, Outcome
from jobhost.firing.host import Host
from jobhost.firing.slots import HostStatus, WorkerSlots
from jobhost.firing.tick import CAP, FLOOR
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import pause_job
from jobhost.store.schema import runs
from tests.support import ManualClock, sample_catalog
from tests.waiting import wait_for

EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}
_JUST_BEFORE = timedelta(seconds=FLOOR / 2)
"""Nearer the instant than any lead: a turn then that claims early takes the occurrence."""


def _at(minute: int, second: float = 0) -> datetime:
    return datetime(2026, 5, 4, 10, minute, tzinfo=UTC) + timedelta(seconds=second)


def _ran_ten_oclock(host: Any, clock: ManualClock) -> None:
    """Run the 10:00 occurrences (the first since the catalog was written), on time."""
    clock.now = _at(0, 1)
    for claim in host.tick():
        assert host.finish(claim) == "succeeded"


def test_a_turn_just_before_an_occurrence_claims_it_to_start_at_its_instant(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])
    _ran_ten_oclock(host, clock)
    clock.now = _at(1) - _JUST_BEFORE

    on_time_only = host.ticker.tick(clock(), 4)
    early = host.ticker.tick(clock(), 4, early=True)

    assert on_time_only.claims == []
    ((claim, _),) = early.claims
    assert (claim.occurrence, claim.started_at) == (_at(1), _at(1))
    row = _run(host.engine, claim.run_id)
    assert (row.outcome, row.queued_at, row.started_at) == ("running", clock.now, _at(1))
    # The next occurrence is woken for ahead of its instant, by no more than the longest lead.
    assert early.next_wake is not None
    assert _at(2) - timedelta(seconds=CAP) <= early.next_wake < _at(2)
    assert host.finish(claim) == "succeeded"
    assert _count(host.engine) == 2


def test_a_job_still_running_is_left_to_the_claim_at_its_instant_which_wakes_on_time(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])  # overlap forbid
    clock.now = _at(0, 1)
    (running,) = host.tick()
    clock.now = _at(1) - _JUST_BEFORE

    turn = host.ticker.tick(clock(), 4, early=True)

    # Nothing decided for 10:01 yet: its run may still end by then. The loop wakes at the
    # instant, not again at once for what it has just looked at.
    assert turn.claims == []
    assert turn.next_wake == _at(1)
    assert _count(host.engine) == 1
    assert host.finish(running) == "succeeded"
    clock.now = _at(1)
    ((claim, _),) = host.ticker.tick(clock(), 4, early=True).claims
    assert claim.occurrence == _at(1)


def test_a_paused_job_or_one_in_a_concurrency_group_is_not_claimed_early(
    replicas: Any, clock: ManualClock
) -> None:
    grouped = {"name": "sample.grouped", "cron": "* * * * *", "concurrency_group": "billing"}
    (host,) = replicas([EVERY_MINUTE, grouped], concurrency_limits={"billing": 1})
    _ran_ten_oclock(host, clock)
    with host.engine.begin() as connection:
        pause_job(connection, "sample.minutely", "ops", "maintenance", clock())
    clock.now = _at(1) - _JUST_BEFORE

    turn = host.ticker.tick(clock(), 4, early=True)

    assert turn.claims == []
    assert _count(host.engine) == 2, "a paused job's miss is recorded at its instant, not before"
    clock.now = _at(1)
    taken = host.ticker.tick(clock(), 4, early=True).claims
    assert [claim.job_name for claim, _ in taken] == ["sample.grouped"]


def test_a_host_starts_each_run_it_claimed_early_at_its_instant_not_before(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    settings = sample_settings([{"name": "sample.second", "interval": "1s"}])
    with _looping(settings, telemetry) as host:
        wait_for(lambda: _count(host.store._engine, "succeeded") >= 3, 10, "three runs")
        with reading(host.store._engine) as connection:
            rows = connection.execute(
                select(runs).where(runs.c.outcome == "succeeded").order_by(runs.c.occurrence)
            ).all()
    spans = {s.attributes["jobhost.run.id"]: s for s in telemetry[1].get_finished_spans()}
    early = [row for row in rows if row.queued_at < row.occurrence]
    assert len(early) >= 2, [(r.occurrence, r.queued_at) for r in rows]
    for row in rows:
        began = datetime.fromtimestamp(spans[row.id].start_time / 1e9, UTC)
        assert began >= row.occurrence, (row.occurrence, began)
        assert row.started_at >= row.occurrence


def test_a_run_claimed_early_and_waiting_at_shutdown_starts_at_its_instant_cancelled(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE])
    _ran_ten_oclock(host, clock)
    clock.now = _at(1) - _JUST_BEFORE
    ((claim, spec),) = host.ticker.tick(clock(), 4, early=True).claims
    calls: list[tuple[float, bool]] = []
    recorded: list[tuple[str, str | None]] = []

    def execute(claim: Any, spec: Any, cancellation: Any, **_: Any) -> Finished:
        calls.append((time.monotonic(), cancellation.cancelled))
        return Finished(
            claim, spec, Outcome("cancelled" if cancellation.cancelled else "succeeded")
        )

    stopping = threading.Event()
    slots = WorkerSlots(
        1,
        execute=execute,
        record=lambda finished: recorded.append(
            (finished.outcome.outcome, finished.outcome.error_type)
        ),
        wake=lambda: None,
        stopping=stopping.is_set,
        status=HostStatus(),
        lease_duration=timedelta(minutes=5),
        store=Store(host.engine, clock),
        host_id=host.host_id,
    )
    start_at = time.monotonic() + 0.3
    slots.submit(claim, spec, start_at=start_at)

    stopping.set()
    slots.cancel_all(grace=10)

    # Shutdown does not start it sooner or lose it: it starts at its instant, cancelled, and
    # its outcome is recorded as any run's in flight at shutdown (not given up on by it).
    ((called_at, cancelled),) = calls
    assert called_at >= start_at and cancelled
    assert recorded == [("cancelled", None)]


@contextmanager
def _looping(settings: Settings, telemetry: Any) -> Iterator[Host]:
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    loop = threading.Thread(target=host.loop, name="test-loop", daemon=True)
    loop.start()
    try:
        yield host
    finally:
        host.request_stop()
        loop.join(10)
        host.shutdown()
        engine.dispose()


def _run(engine: Any, run_id: str) -> Any:
    with reading(engine) as connection:
        return connection.execute(select(runs).where(runs.c.id == run_id)).one()


def _count(engine: Any, outcome: str | None = None) -> int:
    query = select(func.count()).select_from(runs)
    if outcome is not None:
        query = query.where(runs.c.outcome == outcome)
    with reading(engine) as connection:
        return int(connection.execute(query).scalar_one())
