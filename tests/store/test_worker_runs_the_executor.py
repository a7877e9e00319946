"""A host's worker calls the executor on its own thread, with no thread handed the run and
waited on; a call that ignores its timeout is declared stuck while it runs and keeps its worker.

A real host on each store, its loop on a thread of the test.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select

from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.schema import runs
from tests.support import sample_catalog
from tests.waiting import wait_for


def test_the_executor_runs_on_the_worker_that_took_the_run(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    job = {
        "name": "sample.waits",
        "cron": "0 3 * * *",
        "enabled": False,
        "behaviour": "sleep",
        "seconds": 30,
    }
    with _running(sample_settings([job]), telemetry) as host:
        _started(host, "sample.waits")
        stack = wait_for(_executor_stack, 10, "the executor to run")

    files = {frame.filename.replace("\\", "/") for frame in stack}
    # The worker's bookkeeping is on the executor's stack: no second thread runs the call.
    assert any(name.endswith("jobhost/firing/slots.py") for name in files), sorted(files)
    assert any(name.endswith("jobhost/envelope/envelope.py") for name in files), sorted(files)


def test_code_deaf_to_its_timeout_is_stuck_while_it_runs_then_recorded_and_its_worker_freed(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    job = {
        "name": "sample.deaf",
        "cron": "0 3 * * *",
        "enabled": False,
        "behaviour": "ignore-cancel",
        "seconds": 2.5,
        "timeout": "0.2s",
    }
    # The host's heartbeat says the run stuck in the ledger: here, one every half second.
    settings = sample_settings(
        [job], shutdown_grace="0.3s", worker_pool_size=1, heartbeat_interval="0.5s"
    )
    with _running(settings, telemetry) as host:
        run_id = _started(host, "sample.deaf")
        marked = wait_for(
            lambda: _row(host, run_id).error_type == "Stuck", 5, "the run marked stuck"
        )
        row = _row(host, run_id)
        stuck, free = host.status.stuck, host.slots.free()[0]
        assert marked and row.outcome == "running" and row.error_message.startswith("stuck:")
        assert (stuck, free) == (1, 0), "the stuck code keeps its worker"
        wait_for(lambda: _row(host, run_id).outcome != "running", 10, "the code to end")
        after = _row(host, run_id)
        assert (after.outcome, after.error_type) == ("timed_out", "Stuck")
        assert "ignored cancellation (timeout) for 0.3s" in after.error_message
        wait_for(lambda: host.slots.free()[0] == 1, 5, "the worker to be free again")
        assert host.status.stuck == 0


@contextmanager
def _running(settings: Settings, telemetry: Any) -> Iterator[Host]:
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    try:
        yield host
    finally:
        host.shutdown()
        engine.dispose()


def _started(host: Host, name: str) -> str:
    """Ask for a run of ``name`` and let one turn of the host's loop claim and start it."""
    with host.store._engine.begin() as connection:
        request_run(connection, name, "test", "probe", host.clock())
    host.turn()
    (held,) = host.slots.runs()
    return held.claim.run_id


def _executor_stack() -> list[traceback.FrameSummary] | None:
    """The stack of the thread inside the sample plugin's executor, if one is."""
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        stack = traceback.extract_stack(frame)
        if any(s.filename.endswith("sample_jobs.py") and s.name == "_execute" for s in stack):
            return list(stack)
    return None


def _row(host: Host, run_id: str) -> Any:
    with reading(host.store._engine) as connection:
        return connection.execute(select(runs).where(runs.c.id == run_id)).one()
