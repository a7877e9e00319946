"""Waiting on the store's signal instead of a timer: who signals, and what a waiter sees."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, reading
from jobhost.store.actions import request_run
from jobhost.store.schema import signals
from jobhost.store.signals import ChangeSignal, notify
from tests.conftest import postgres_schema
from tests.migrated import migrate
from tests.support import ManualClock

MANUAL_ONLY = {"name": "sample.minutely", "cron": "* * * * *", "enabled": False}


def test_a_waiter_is_woken_by_a_signal_sent_while_it_waits(replicas: Any) -> None:
    (host,) = replicas([MANUAL_ONLY])
    before = _version(host.engine)

    def signal_soon() -> None:
        with host.engine.begin() as connection:
            notify(connection)

    with ChangeSignal(host.engine) as signal:
        threading.Timer(0.2, signal_soon).start()
        assert signal.wait(30) is True
        assert _version(host.engine) == before + 1


def test_a_signal_sent_before_the_wait_but_after_entering_is_not_missed(replicas: Any) -> None:
    (host,) = replicas([MANUAL_ONLY])

    with ChangeSignal(host.engine) as signal:
        with host.engine.begin() as connection:
            notify(connection)
        assert signal.wait(30) is True


def test_a_host_signals_when_it_claims_a_request_and_when_it_records_the_run(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([MANUAL_ONLY])
    with host.engine.begin() as connection:
        request_run(connection, "sample.minutely", "alice", "rerun", clock())
    before = _version(host.engine)

    with ChangeSignal(host.engine) as claimed:
        (claim,) = host.tick()
        assert claimed.wait(30) is True
    assert _version(host.engine) == before + 1
    with ChangeSignal(host.engine) as recorded:
        assert host.finish(claim) == "succeeded"
        assert recorded.wait(30) is True
    assert _version(host.engine) == before + 2


def test_a_scheduled_run_signals_nobody(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([{**MANUAL_ONLY, "enabled": True}])
    clock.advance(minutes=1)
    before = _version(host.engine)

    (claim,) = host.tick()
    assert host.finish(claim) == "succeeded"

    assert _version(host.engine) == before


def _version(engine: Engine) -> int:
    with reading(engine) as connection:
        return int(connection.execute(select(signals.c.version)).scalar_one())


def test_a_signal_in_another_store_on_the_same_database_wakes_no_waiter_here() -> None:
    # PostgreSQL's NOTIFY reaches every listener of the database: the channel is the store's own.
    with postgres_schema() as here_url, postgres_schema() as there_url:
        here, there = create_store_engine(here_url), create_store_engine(there_url)
        try:
            for engine in (here, there):
                migrate(engine)
            with ChangeSignal(here) as signal:
                with there.begin() as connection:
                    notify(connection)
                assert signal.wait(1.0) is False
                with here.begin() as connection:
                    notify(connection)
                assert signal.wait(30) is True
        finally:
            here.dispose()
            there.dispose()
