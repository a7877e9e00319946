"""SQLite's signal watch: an idle store wakes nobody, and a command's signal from another
process wakes the host at once, through the doorbell beside the store file.

Wake-ups are counted by the kernel: a thread's voluntary context switches (``/proc``), each one
a time it went to sleep. A thread that polls on a timer sleeps again after each look.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.store.signals import ChangeSignal, SignalWatcher, notify
from tests.support import sample_catalog
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="counts wake-ups through Linux's /proc"
)

WINDOW_SECONDS = 1.6
"""An observation window, not a wait: three periods of the half-second poll this replaced."""
SETTLE_SECONDS = 0.5
"""Threads block once when they start; the window opens after that."""
SIGNAL_FROM_ANOTHER_PROCESS = """
import sys
from jobhost.store import create_store_engine
from jobhost.store.signals import notify
engine = create_store_engine(sys.argv[1], create=sys.argv[2] == "create")
with engine.begin() as connection:
    notify(connection)
"""


# A command opens the file without creating it (a ``file:`` URI); ``jobhost run`` may create it.
OPENED_AS = pytest.mark.parametrize("opened_as", ["command", "create"])


@OPENED_AS
def test_an_idle_watcher_never_wakes_and_another_process_signal_wakes_it_at_once(
    tmp_path: Path, opened_as: str
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    woken = threading.Event()
    watcher = SignalWatcher(engine, woken.set)
    watcher.start()
    try:
        time.sleep(SETTLE_SECONDS)
        (thread,) = [t for t in threading.enumerate() if t.name == "jobhost-signals"]
        before = _wake_ups(thread)
        time.sleep(WINDOW_SECONDS)
        assert _wake_ups(thread) == before, "an idle store wakes the watcher no time at all"
        for ring in range(3):
            woken.clear()
            _signal_from_another_process(url, opened_as)
            assert woken.wait(1), f"another process's signal {ring + 1} wakes the host at once"
    finally:
        watcher.stop()
        engine.dispose()


def test_a_signal_wakes_the_watcher_and_stop_ends_its_wait_on_every_store(
    store_url: str,
) -> None:
    engine = create_store_engine(store_url)
    upgrade(engine)
    woken = threading.Event()
    watcher = SignalWatcher(engine, woken.set)
    watcher.start()
    try:
        # Until the watcher listens, a signal passes it by: signal until one wakes it.
        for _ in range(40):
            with engine.begin() as connection:
                notify(connection)
            if woken.wait(0.5):
                break
        assert woken.is_set(), "a command's signal wakes the host"
        (thread,) = [t for t in threading.enumerate() if t.name == "jobhost-signals"]
    finally:
        watcher.stop()
    thread.join(10)
    engine.dispose()
    assert not thread.is_alive(), "stop ends the wait for the next signal"


# SQLite only: every store on the server's test database NOTIFYs the one channel, so other test
# runs' signals would wake a PostgreSQL host. The idle benchmark counts PostgreSQL's wake-ups.
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_an_idle_host_wakes_for_its_heartbeat_and_nothing_else(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    settings = sample_settings(
        [{"name": "sample.nightly", "cron": "0 3 * * *"}], heartbeat_interval="0.5s"
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    others = set(threading.enumerate())  # threads earlier tests left behind are not this host
    with _running(
        Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    ) as host:
        wait_for(lambda: host.status.ticks >= 1, 30, "the loop's first turn")
        time.sleep(SETTLE_SECONDS)
        threads = [t for t in threading.enumerate() if t not in others]
        before = {t.name: _wake_ups(t) for t in threads}
        ticks = host.status.ticks
        time.sleep(WINDOW_SECONDS)
        woke = {t.name: _wake_ups(t) - before[t.name] for t in threads}
        assert host.status.ticks == ticks, "the loop did not turn"
    assert woke.pop("jobhost-heartbeat") >= 2, "three heartbeats are due in the window"
    assert {"loop", "jobhost-signals", "jobhost-recorder"} <= set(woke)
    assert woke == dict.fromkeys(woke, 0), "nothing but the heartbeat wakes an idle host"


@OPENED_AS
def test_a_command_waiting_for_a_host_sleeps_until_another_process_signals(
    tmp_path: Path, opened_as: str
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    upgrade_engine = create_store_engine(url)
    upgrade(upgrade_engine)
    upgrade_engine.dispose()
    engine = create_store_engine(url, create=opened_as == "create")
    waited: list[bool] = []
    try:
        with ChangeSignal(engine) as signal:
            waiter = threading.Thread(target=lambda: waited.append(signal.wait(30)), name="w")
            waiter.start()
            time.sleep(SETTLE_SECONDS)
            before = _wake_ups(waiter)
            time.sleep(WINDOW_SECONDS)
            assert _wake_ups(waiter) == before, "the waiter does not poll the counter"
            _signal_from_another_process(url, opened_as)
            waiter.join(10)
        assert waited == [True]
    finally:
        engine.dispose()


def test_a_socket_left_by_a_dead_process_is_removed_by_the_next_ring(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    doorbells = tmp_path / "store.db-signals"
    doorbells.mkdir(exist_ok=True)
    left = doorbells / "999999-dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dead:
        dead.bind(str(left))  # closed without unlinking, as a killed process leaves it
    try:
        _signal_from_another_process(url, "command")
        assert not left.exists()
    finally:
        engine.dispose()


def _signal_from_another_process(url: str, opened_as: str) -> None:
    subprocess.run([sys.executable, "-c", SIGNAL_FROM_ANOTHER_PROCESS, url, opened_as], check=True)


def _wake_ups(thread: threading.Thread) -> int:
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("voluntary_ctxt")]
    return int(line.split()[1])


class _running:
    """A host started, its loop on a thread named ``loop``; stopped and shut down on exit."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._loop = threading.Thread(target=host.loop, name="loop", daemon=True)

    def __enter__(self) -> Host:
        self._host.start()
        self._loop.start()
        return self._host

    def __exit__(self, *_exc: object) -> None:
        self._host.request_stop()
        self._loop.join(10)
        self._host.shutdown()
        self._host.store._engine.dispose()
