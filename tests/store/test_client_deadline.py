"""The client's own deadline on a wait for PostgreSQL, against the real server.

A statement the server does not end (its ``statement_timeout`` off for the transaction, as a
migration sets it) stands for a server that never answers: the client gives up at the store's
statement timeout plus the margin, the connection is dropped from the pool, and the next call
gets a fresh one. A migration's connection has no such deadline. A host's ``LISTEN`` connection,
quiet by nature, is asked now and then whether the server is there, within the same deadline.
On SQLite a thread waits for another of its process's write transactions only as long as SQLite
waits for another process's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError

from jobhost.store import create_store_engine, signals, upgrade
from jobhost.store import sqlite as sqlite_module
from jobhost.store.engine import DEADLINE_MARGIN, is_store_down, lift_deadline
from jobhost.store.signals import SignalWatcher, notify
from tests.reliability.proxy import CutProxy
from tests.waiting import wait_for

STATEMENT = 0.5
DEADLINE = STATEMENT + DEADLINE_MARGIN


@pytest.mark.postgres
def test_a_wait_past_the_deadline_drops_the_connection_and_the_next_call_gets_a_fresh_one(
    postgres_url: str,
) -> None:
    engine = create_store_engine(postgres_url, statement_timeout=STATEMENT)
    try:
        with engine.connect() as connection:
            before = connection.execute(text("SELECT pg_backend_pid()")).scalar()
        began = time.monotonic()
        with pytest.raises(OperationalError) as raised, engine.begin() as connection:
            connection.execute(text("SET LOCAL statement_timeout = 0"))
            connection.execute(text("SELECT pg_sleep(:s)"), {"s": DEADLINE + 10})
        took = time.monotonic() - began
        assert DEADLINE - 0.5 < took < DEADLINE + 2, took
        assert is_store_down(raised.value), raised.value
        assert f"did not answer within {DEADLINE:g}s" in str(raised.value)
        with engine.connect() as connection:
            after = connection.execute(text("SELECT pg_backend_pid()")).scalar()
        assert after != before  # the old connection was dropped, not handed out again
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_lifted_deadline_waits_for_the_server_and_comes_back_with_the_connection(
    postgres_url: str,
) -> None:
    engine = create_store_engine(postgres_url, statement_timeout=STATEMENT)
    try:
        with engine.begin() as connection:
            lift_deadline(connection)
            connection.execute(text("SET LOCAL statement_timeout = 0"))
            assert connection.execute(text("SELECT pg_sleep(:s) IS NULL"), {"s": DEADLINE + 0.5})
        began = time.monotonic()
        # The same connection, back from the pool: bounded again.
        with pytest.raises(OperationalError), engine.begin() as connection:
            connection.execute(text("SET LOCAL statement_timeout = 0"))
            connection.execute(text("SELECT pg_sleep(:s)"), {"s": DEADLINE + 10})
        assert time.monotonic() - began < DEADLINE + 2
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_listener_whose_connection_is_orphaned_listens_again_and_wakes_its_host(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals, "_LISTEN_PING_SECONDS", 1.0)  # instead of 30 s
    server = make_url(postgres_url)
    direct = create_store_engine(postgres_url)
    upgrade(direct)
    woken: list[float] = []
    with CutProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        url = server.set(host="127.0.0.1", port=proxy.port)
        engine = create_store_engine(url, statement_timeout=STATEMENT, connect_timeout=2)
        watcher = SignalWatcher(engine, lambda: woken.append(time.monotonic()))
        watcher.start()
        try:
            wait_for(lambda: _notified(direct, woken), 10, "the listener to hear a signal")
            proxy.orphan()
            time.sleep(1)
            proxy.restore()
            heard = len(woken)
            # Asked after a quiet second, it finds no answer within its deadline, connects
            # again, and wakes its host once for whatever was signalled meanwhile.
            wait_for(lambda: len(woken) > heard, 1 + DEADLINE + 10, "the listener to listen again")
            wait_for(lambda: _notified(direct, woken), 10, "the new listener to hear a signal")
        finally:
            watcher.stop()
            engine.dispose()
            direct.dispose()


def _notified(engine: Engine, woken: list[float]) -> bool:
    before = len(woken)
    with engine.begin() as connection:
        notify(connection)
    time.sleep(0.3)
    return len(woken) > before


def test_an_sqlite_writer_waits_for_another_thread_of_its_process_only_as_long_as_sqlite_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_BUSY_MS", 500)  # instead of 30 s
    engine = create_store_engine(f"sqlite:///{tmp_path}/store.db")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with engine.begin():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        began = time.monotonic()
        with pytest.raises(OperationalError) as raised, engine.begin():
            pass
        assert 0.4 < time.monotonic() - began < 5
        assert is_store_down(raised.value) and "locked" in str(raised.value)
    finally:
        release.set()
        holder.join(10)
        engine.dispose()
    with engine.begin() as connection:  # the lock is free again once the holder is done
        assert connection.execute(text("SELECT 1")).scalar() == 1
