"""Waking every host at once after a manual trigger, a pause or a resume.

PostgreSQL delivers a NOTIFY to every host listening on the store's channel, one per schema, so
stores that share a database do not wake each other's hosts. On SQLite, commands bump a counter
in the transaction and, once it commits, ring the doorbell beside the store file
(:mod:`jobhost.store.sqlite`); each waiting process reads the counter when rung. A host's
heartbeat also reads it (:meth:`SignalWatcher.look`), so a ring lost to a writer killed after
its commit delays the wake by one heartbeat at most. Without a doorbell, the watcher looks every
half second at the store file and its write-ahead log, reading the counter when one changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobhost_contracts import redact_text
from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import OperationalError

from jobhost.store.engine import StoreRetry, database, reading
from jobhost.store.postgres import channel, pooling_of
from jobhost.store.schema import signals
from jobhost.store.sqlite import Doorbell, store_file

if TYPE_CHECKING:
    import psycopg

__all__ = ["ChangeSignal", "SignalWatcher", "notify"]

_log = logging.getLogger("jobhost.store")

# How often a host (a command waiting for a host's answer) behind a transaction pooler with no
# direct URL reads the counter.
_POOLED_POLL_SECONDS = 1.0
_POOLED_SIGNAL_SECONDS = 0.25
_SQLITE_POLL_SECONDS = 0.5
_RETRY_WAITS = (0.5, 1.0, 2.0, 5.0)
"""Pauses before the watcher connects again: a restarted server is back within a second or two."""
_LISTEN_PING_SECONDS = 30.0
"""How long a quiet listener waits before it asks its connection whether the server is there."""
_SQLITE_SIGNAL_SECONDS = 0.05
"""How often a waiter without a doorbell reads the SQLite counter (a short wait only)."""


def notify(connection: Connection) -> None:
    """Wake every host once the surrounding transaction commits."""
    connection.execute(update(signals).values(version=signals.c.version + 1))
    database(connection).notify(connection)


class SignalWatcher:
    """A daemon thread that calls ``wake`` whenever a command signals the hosts."""

    def __init__(self, engine: Engine, wake: Callable[[], None]) -> None:
        self._engine = engine
        self._wake = wake
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="jobhost-signals", daemon=True)
        self._lock = threading.Lock()
        self._seen: int | None = None
        self._doorbell: Doorbell | None = None
        self._interrupt: socket.socket | None = None  # PostgreSQL: ends the listener's wait
        self._listened = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            if self._doorbell is not None:
                self._doorbell.interrupt()
            if self._interrupt is not None:
                with contextlib.suppress(OSError):
                    self._interrupt.send(b"!")

    def look(self) -> None:
        """SQLite: read the counter now and wake the host if it moved (a lost ring's net)."""
        if not database(self._engine).listens:
            self._read_counter()

    def _watch(self) -> None:
        # The store may be away: the loop's own polling goes on meanwhile.
        retry = StoreRetry(
            what="signal watcher",
            waits=_RETRY_WAITS,
            retry_on=lambda error: isinstance(error, Exception),
            stopping=self._stopped,
            warn="each",
        )
        # A listener that loses its connection returns, so each outage starts again from the
        # shortest pause; the pause here keeps a server that drops every connection at once
        # from being called in a tight loop.
        while not self._stopped.is_set():
            with contextlib.suppress(Exception):
                retry.call(self._follow)
            self._stopped.wait(_RETRY_WAITS[0])

    def _follow(self) -> None:
        if not database(self._engine).listens:
            self._poll()
        elif _listen_dsn(self._engine) is None:
            self._poll_stamps(None, _POOLED_POLL_SECONDS)
        else:
            self._listen()

    def _listen(self) -> None:
        import psycopg  # PostgreSQL only: an SQLite store's command need not import it

        from jobhost.store.deadline import listener

        dsn = _listen_dsn(self._engine)
        assert dsn is not None
        name = channel(self._engine)
        stop_reader, stop_writer = socket.socketpair()
        with self._lock:
            self._interrupt = stop_writer
        try:
            with listener(self._engine, dsn) as connection:
                _listen_on_channel(connection, name)
                # What arrives during a ping is handed to the handlers, not left for the socket.
                pinged: list[object] = []
                connection.add_notify_handler(pinged.append)
                if self._listened:
                    self._wake()  # what was signalled while no one listened is lost
                self._listened = True
                # The socket's readiness, not psycopg's notifies(), which wakes every 0.1s.
                with selectors.DefaultSelector() as selector:
                    selector.register(connection.pgconn.socket, selectors.EVENT_READ)
                    selector.register(stop_reader, selectors.EVENT_READ)
                    while not self._stopped.is_set():
                        ready = selector.select(_LISTEN_PING_SECONDS)
                        if self._stopped.is_set():
                            return
                        try:
                            if ready:
                                received = _received_notify(connection.pgconn)
                            else:
                                # Quiet a while: is anybody there? A server hung behind a live
                                # peer sends nothing, and only a question within the store's
                                # deadline finds it out.
                                connection.execute("SELECT 1")
                                received, pinged[:] = bool(pinged), []
                        except psycopg.OperationalError as error:
                            first_line = (str(error).splitlines() or [""])[0]
                            _log.warning(
                                "signal watcher lost its connection (%s); listening again",
                                redact_text(first_line),
                            )
                            return
                        if received:
                            self._wake()
        finally:
            with self._lock:
                self._interrupt = None
            stop_reader.close()
            stop_writer.close()

    def _poll(self) -> None:
        path = store_file(self._engine)
        doorbell = Doorbell.open(path)
        if doorbell is None:
            self._poll_stamps(path)
            return
        with self._lock:
            self._doorbell = doorbell
        try:
            self._read_counter()
            while not self._stopped.is_set():
                doorbell.wait(None)
                if not self._stopped.is_set():
                    self._read_counter()
        finally:
            with self._lock:
                self._doorbell = None
            doorbell.close()

    def _poll_stamps(self, path: Path | None, seconds: float = _SQLITE_POLL_SECONDS) -> None:
        """Read the counter every ``seconds``; of a store file, only once it was written."""
        self._read_counter()
        stamp: tuple[tuple[int, int, int], ...] | None = None
        while not self._stopped.wait(seconds):
            if path is not None:
                looked = tuple(_stat(file) for file in (path, path.with_name(f"{path.name}-wal")))
                if looked == stamp:
                    continue  # nobody wrote the store: the counter cannot have moved
                stamp = looked
            self._read_counter()

    def _read_counter(self) -> None:
        # Wake the host when the counter moved since the last read (not on the first).
        version = _counter(self._engine)
        with self._lock:
            moved = self._seen is not None and version != self._seen
            self._seen = version
        if moved:
            self._wake()


class ChangeSignal:
    """One wait for the hosts' signal: a command, a pause, a request claimed or refused. It
    listens from entry, so a signal between the caller's read and its :meth:`wait` is not
    missed: read what you wait for after entering, then wait, then read again."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._listening: psycopg.Connection[Any] | None = None
        self._doorbell: Doorbell | None = None
        self._seen: int | None = None

    def __enter__(self) -> ChangeSignal:
        dsn = _listen_dsn(self._engine)
        if dsn is not None:
            import psycopg

            name = channel(self._engine)
            try:
                self._listening = psycopg.connect(dsn, autocommit=True)
                _listen_on_channel(self._listening, name)
            except psycopg.Error as error:  # the store is away: said as every store call says it
                raise OperationalError("LISTEN", None, error) from error
        else:
            self._doorbell = Doorbell.open(store_file(self._engine))
            try:
                self._seen = _counter(self._engine)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._listening is not None:
            self._listening.close()
        if self._doorbell is not None:
            self._doorbell.close()

    def wait(self, timeout: float) -> bool:
        """Until the next signal, or ``timeout`` seconds; whether a signal came."""
        if self._listening is not None:
            notified = self._listening.notifies(timeout=max(timeout, 0.0), stop_after=1)
            return any(True for _ in notified)
        deadline = time.monotonic() + timeout
        while True:
            version = _counter(self._engine)
            if version != self._seen:
                self._seen = version
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._doorbell is not None:
                self._doorbell.wait(left)
            else:
                listens = database(self._engine).listens
                pause = _POOLED_SIGNAL_SECONDS if listens else _SQLITE_SIGNAL_SECONDS
                time.sleep(min(pause, left))


def _counter(engine: Engine) -> int | None:
    with reading(engine) as connection:
        version: int | None = connection.execute(select(signals.c.version)).scalar()
    return version


def _listen_dsn(engine: Engine) -> str | None:
    """Where to ``LISTEN``: the store itself, or past its transaction pooler; None where no
    connection can (SQLite, or a transaction pooler with no direct URL)."""
    if not database(engine).listens:
        return None
    pooling = pooling_of(engine)
    if pooling.mode != "transaction":
        url = engine.url
    elif pooling.listen_url is not None:
        url = make_url(pooling.listen_url)
    else:
        return None
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def _listen_on_channel(connection: psycopg.Connection[Any], channel: str) -> None:
    from psycopg import sql

    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))


def _received_notify(pgconn: Any) -> bool:
    """Read what the server sent; whether a notification was among it."""
    pgconn.consume_input()
    received = False
    while pgconn.notifies() is not None:
        received = True
    return received


def _stat(file: Path) -> tuple[int, int, int]:
    """Modification time, change time and size of ``file`` (the store's, or its write-ahead log)."""
    try:
        status = os.stat(file)
    except OSError:
        return (0, 0, -1)
    return (status.st_mtime_ns, status.st_ctime_ns, status.st_size)
