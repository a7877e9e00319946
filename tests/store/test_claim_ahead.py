"""Claim ahead: a turn claims due runs beyond its free workers into a short local queue.

A host claims ahead once it is behind (its last claim left due work for want of a worker). The
queued runs start one after another as a worker frees, each recording when it really
started (not the claim's instant). At shutdown the runs still queued are given back, pending and
due at once, and the next host to claim starts each exactly once, keeping its run id and
attempt.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from jobhost.clock import SystemClock
from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.records import RunRecord
from jobhost.store import Store, create_store_engine, ledger, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs, schedules
from tests.support import sample_catalog
from tests.waiting import wait_for

JOBS = 3
_WARM = "sample.warm"
"""A job run by hand once as a host starts: the host times a run of a few milliseconds."""


def _jobs(seconds: float) -> list[dict[str, Any]]:
    return [
        *(
            {"name": f"sample.quick-{i}", "cron": "* * * * * *", "behaviour": "sleep", "seconds": s}
            for i, s in enumerate([seconds] * JOBS)
        ),
        {"name": _WARM, "cron": "0 3 * * *", "enabled": False},
    ]


def _runs(engine: Any) -> list[RunRecord]:
    """The runs of the quick jobs."""
    with reading(engine) as connection:
        query = select(runs).where(runs.c.attempt >= 1, runs.c.job_name != _WARM)
        return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def _finished(engine: Any, count: int, turning: Host | None = None) -> list[RunRecord]:
    def done() -> list[RunRecord] | None:
        if turning is not None:
            turning.turn()  # the loop's turns, one a poll
        found = [r for r in _runs(engine) if r.outcome not in {"running", "pending"}]
        return found if len(found) >= count else None

    found: list[RunRecord] = wait_for(done, 20, f"{count} runs recorded", every=0.05)
    return found


def _host(settings: Settings, engine: Any, telemetry: Any) -> Host:
    """A started host that has timed one run of a few milliseconds: its queue has room for
    what one worker starts within the horizon."""
    _at_next_second()  # the quick jobs' next occurrence is a second away: the warm-up runs alone
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    with engine.begin() as connection:
        run_id = request_run(connection, _WARM, "tester", "warm-up", SystemClock()())
    host.turn()

    def warmed() -> bool:
        with reading(engine) as connection:
            query = select(runs.c.outcome).where(runs.c.id == run_id)
            return connection.execute(query).scalar_one() == "succeeded"

    wait_for(warmed, 10, "the warm-up run recorded", every=0.01)
    return host


def _at_next_second() -> None:
    time.sleep(1.05 - datetime.now(UTC).microsecond / 1e6)  # waits on the clock itself


def test_one_turn_claims_beyond_the_free_worker_and_each_run_records_its_own_start(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    settings = sample_settings(_jobs(0.1), worker_pool_size=1)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = _host(settings, engine, telemetry)
    try:
        _at_next_second()
        host.turn()  # one worker: one run, and due work left behind
        host.turn()  # behind, the host claims ahead: the other runs wait in the queue, claimed
        rows = _finished(engine, JOBS)
    finally:
        host.request_stop()
        host.shutdown()
        engine.dispose()
    assert sorted(r.job_name for r in rows) == [f"sample.quick-{i}" for i in range(JOBS)]
    assert {r.outcome for r in rows} == {"succeeded"}
    ordered = sorted(rows, key=lambda r: r.started_at or datetime.min.replace(tzinfo=UTC))
    for before, after in itertools.pairwise(ordered):
        # One worker ran them in turn: a queued run's start is when it began, after the
        # previous run ended, not when it was claimed.
        assert before.finished_at is not None and after.started_at is not None
        assert after.started_at >= before.finished_at, (before, after)


def test_runs_still_queued_at_shutdown_are_given_back_and_run_once_by_the_next_host(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    settings = sample_settings(_jobs(0.3), worker_pool_size=1)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    try:
        host = _host(settings, engine, telemetry)
        try:
            _at_next_second()
            host.turn()
            host.turn()
        finally:
            host.request_stop()
            host.shutdown()
        rows = _runs(engine)
        assert len(rows) == JOBS
        given_back = [r for r in rows if r.outcome == "pending"]
        assert len(given_back) == JOBS - 1  # the one worker had started one; the rest waited
        for run in given_back:
            assert run.host_id is None and run.started_at is None and run.lease_expires_at is None
            assert run.not_before is not None and run.attempt == 1
            assert run.source in {"schedule", "catch-up"}  # as claimed: not turned into a retry
        with reading(engine) as connection:
            holders = set(connection.execute(select(schedules.c.lease_run_id)).scalars())
        assert not holders & {r.id for r in given_back}  # their overlap rule waits for nothing

        after = _host(settings, engine, telemetry)
        try:
            _finished(engine, JOBS, turning=after)
        finally:
            after.request_stop()
            after.shutdown()
        by_id = {r.id: r for r in _runs(engine) if r.occurrence == given_back[0].occurrence}
        assert len(by_id) == JOBS  # nothing duplicated: the same rows, started again
        for run in given_back:
            again = by_id[run.id]
            assert again.outcome == "succeeded" and again.attempt == 1
            assert again.started_at is not None and again.started_at >= run.not_before
        # Giving back touches only runs still running unstarted on the host: a finished one stays.
        before = {r.id: r.outcome for r in _runs(engine)}
        assert ledger.release_runs(engine, after.host_id, list(by_id), SystemClock()) == set()
        assert {r.id: r.outcome for r in _runs(engine)} == before
    finally:
        engine.dispose()
