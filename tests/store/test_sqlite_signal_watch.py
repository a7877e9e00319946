"""SQLite's signal watch: nothing read while the store is unchanged, a wake when a command
signals the hosts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import event

from jobhost.store import create_store_engine, upgrade
from jobhost.store.signals import SignalWatcher, notify


def test_an_unchanged_store_is_not_read_and_a_signal_wakes_the_host(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    host_engine, command_engine = create_store_engine(url), create_store_engine(url)
    upgrade(command_engine)
    statements: list[str] = []
    woken = threading.Event()

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(host_engine, "before_cursor_execute", count)
    watcher = SignalWatcher(host_engine, woken.set)
    watcher.start()
    try:
        assert not woken.wait(1.6), "nothing signalled: no wake"
        # The first looks read the counter (opening the store makes its log file); after that,
        # an unchanged store is never read.
        read_so_far = len(statements)
        assert not woken.wait(1.1)
        assert len(statements) == read_so_far, "an idle store costs no statement"
        with command_engine.begin() as connection:
            notify(connection)
        assert woken.wait(5), "the command's signal wakes the host"
    finally:
        watcher.stop()
        host_engine.dispose()
        command_engine.dispose()
