"""The store on an SQLite file, the embedded default: every transaction takes the write lock at
BEGIN (``BEGIN IMMEDIATE``) so that a claim is atomic across processes sharing the file, and WAL
lets readers (``jobhost report``) proceed meanwhile. The store's time is the host's clock.

A store file this process may not write (the file, or its directory, where SQLite keeps the
WAL) is opened read-only: the commands that only read (``report``, ``history``, ``health``)
work, and :func:`is_read_only` lets a command that writes refuse with a clear message up front.

Processes sharing the file wake each other through a doorbell beside it (``jobhost.db`` ->
``jobhost.db-signals/``): each process that waits for the hosts' signal binds a Unix datagram
socket there, and a writer whose transaction signalled rings every socket once it has committed.
A waiter sleeps in ``recv`` until rung: an idle store costs no wake-up. A socket whose process
died is removed by the next ring (the kernel refuses the datagram). Where the mechanism is
unavailable (no ``AF_UNIX``, a directory this process may not write, a path longer than a socket
address holds), :meth:`Doorbell.open` answers None and the caller polls instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sqlite3
import stat
import threading
import weakref
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import ColumnElement, String, Table, create_engine, event, func
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.exc import OperationalError

from jobhost.clock import Clock, utc_instant

_BUSY_MS = 30_000
READ_ONLY = "jobhost_read_only"
"""The execution option of a connection for reads only: its BEGIN takes no write lock."""
_READ_ONLY_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
_WRITE_LOCK = "jobhost_write_lock"
_RING = "jobhost_ring"
# One lock per SQLite file, shared by every engine of this process on it.
_FILE_LOCKS: dict[str, threading.RLock] = {}
_ENGINE_LOCKS: weakref.WeakKeyDictionary[Engine, threading.RLock] = weakref.WeakKeyDictionary()
# The file each SQLite engine opened: a command's URL names it as a ``file:`` URI (read-only, or
# refusing to create it), which no longer says where the file and its doorbells are.
_STORE_FILES: weakref.WeakKeyDictionary[Engine, Path] = weakref.WeakKeyDictionary()


class SQLite:
    batches = False
    listens = False
    server = False
    typed = False
    lateral = False
    marker = "?"
    # An instant's naive UTC text, fixed width: text order is time order.
    instant_type = String(32)

    def open(self, url: URL, create: bool, options: dict[str, Any], **_timeouts: Any) -> Engine:
        path = sqlite_path(url)
        read_only = path is not None and _not_writable(path)
        connect_args: dict[str, Any] = {"timeout": _BUSY_MS / 1000, "check_same_thread": False}
        if path is not None and (read_only or not create):
            url = _file_url(url, path, read_only)
        engine = create_engine(url, connect_args=connect_args, **options)
        if read_only:
            _READ_ONLY_ENGINES.add(engine)
        # Threads of one process queue for the write lock here, woken the moment it is free,
        # instead of sleeping in SQLite's busy handler between tries.
        key = str(path) if path is not None else f"memory:{id(engine)}"
        _ENGINE_LOCKS[engine] = _FILE_LOCKS.setdefault(key, threading.RLock())
        if path is not None:
            _STORE_FILES[engine] = path
        event.listen(engine, "connect", lambda raw, _record: _on_connect(raw, read_only))
        event.listen(engine, "begin", _on_begin)
        # The commit event comes before the driver's commit: the transaction ends there, so the
        # lock is released only once the write is durable and the file's lock is free.
        event.listen(engine, "commit", lambda connection: _end(connection, "COMMIT"))
        event.listen(engine, "rollback", lambda connection: _end(connection, "ROLLBACK"))
        return engine

    def now(self, connection: Connection, fallback: Clock) -> datetime:
        return fallback()

    def locked(self, query: Any, **for_update: Any) -> Any:
        # Every transaction of the store holds the file's write lock.
        return query

    def insert(self, table: Table) -> Any:
        from sqlalchemy.dialects.sqlite import insert

        return insert(table)

    def notify(self, connection: Connection) -> None:
        # Once this transaction commits, the processes waiting beside the file are woken (see
        # :func:`ring`); a rollback rings nobody.
        connection.info[_RING] = True

    def joined(self, value: Any, separator: str, *order: Any) -> ColumnElement[Any]:
        return func.group_concat(value, separator)

    @staticmethod
    def bind_instant(value: datetime | None) -> str | None:
        return None if value is None else _text(value)

    def read_instant(
        self, slow: Callable[[Any, Dialect], datetime | None], dialect: Dialect
    ) -> Callable[[Any], datetime | None]:
        parse = datetime.fromisoformat

        def process(value: Any) -> datetime | None:
            if value is None:
                return None
            try:
                # The stored text is naive UTC: parsed with its offset, the value comes out
                # aware in one step, several times faster than replace(tzinfo=UTC) after it.
                return parse(value + "+00:00")
            except (TypeError, ValueError):
                return slow(value, dialect)  # text with an offset of its own, or no time

        return process


def is_read_only(engine: Engine) -> bool:
    return engine in _READ_ONLY_ENGINES


def store_file(engine: Engine) -> Path | None:
    """The SQLite file ``engine`` opened (None on PostgreSQL), whatever its URL says."""
    return _STORE_FILES.get(engine)


def sqlite_path(url: str | URL) -> Path | None:
    """The file of an SQLite URL, absolute; None for PostgreSQL or an in-memory database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in {"", ":memory:"} or database.startswith("file:") or "mode=memory" in database:
        return None
    return Path(database).expanduser().absolute()


_AWAY = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})
"""An SQLite store's file that cannot be written (a full disk, a failing one): it comes back
when the space or the device does, as a server does after an outage."""


def is_away(error: BaseException) -> bool:
    """Whether ``error`` is the driver's own (SQLite's COMMIT is sent beneath SQLAlchemy's
    wrapping), of a file that cannot be written."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and (
        isinstance(code, int) and code & 0xFF in _AWAY
    )


def _text(value: datetime) -> str:
    """The text of ``value``, remembered: a claim of a thousand runs binds the same few
    instants thousands of times. Shared by every thread: a dict's get and set are atomic."""
    # A naive value equals no aware key, so it misses here and utc_instant refuses it.
    known = _TEXTS.get(value)
    if known is None:
        # SQLAlchemy's own SQLite layout, several times faster than strftime.
        known = utc_instant(value).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        if len(_TEXTS) >= _REMEMBERED_TEXTS:
            _TEXTS.clear()
        _TEXTS[value] = known
    return known


# Instants whose text is remembered (a few hundred kilobytes): enough for a record of a
# thousand runs to find its starts and ends again; past this the memory starts again.
_REMEMBERED_TEXTS = 4096
_TEXTS: dict[datetime, str] = {}


def _not_writable(path: Path) -> bool:
    # SQLite in WAL mode writes beside the file (-wal, -shm): the directory counts too.
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _file_url(url: URL, path: Path, read_only: bool) -> URL:
    query = {"mode": "ro" if read_only else "rw", "uri": "true"}
    # With no WAL file beside it, nothing is pending: the file alone is the whole store, and
    # "immutable" lets SQLite read it without creating the -shm it has no right to create.
    if read_only and not path.with_name(path.name + "-wal").exists():
        query["immutable"] = "1"
    return url.set(database=f"file:{quote(str(path))}").update_query_dict(query)


def _on_connect(dbapi_connection: Any, read_only: bool) -> None:
    # Let SQLAlchemy's begin event issue BEGIN itself, instead of pysqlite's deferred BEGIN.
    dbapi_connection.isolation_level = None
    busy = f"busy_timeout={_BUSY_MS}"
    # Read-only: no journal-mode change, which would be a write.
    pragmas = [busy] if read_only else ["journal_mode=WAL", busy, "synchronous=NORMAL"]
    cursor = dbapi_connection.cursor()
    for pragma in pragmas:
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _on_begin(connection: Connection) -> None:
    if connection.get_execution_options().get(READ_ONLY) or is_read_only(connection.engine):
        connection.exec_driver_sql("BEGIN")
        return
    lock = _ENGINE_LOCKS[connection.engine]
    # Bounded as SQLite's own wait for the file's lock is: a thread of this process stuck in its
    # transaction makes the others fail as a locked store, not wait for ever.
    if not lock.acquire(timeout=_BUSY_MS / 1000):
        # As SQLAlchemy reports SQLite's own busy timeout, so every caller judges it the same.
        locked = sqlite3.OperationalError("database is locked")
        raise OperationalError("BEGIN IMMEDIATE", None, locked)
    connection.info[_WRITE_LOCK] = lock
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        _release(connection)
        raise


def _end(connection: Connection, statement: str) -> None:
    rings = connection.info.pop(_RING, False)
    if _WRITE_LOCK not in connection.info:
        return
    try:
        raw: Any = connection.connection.dbapi_connection
        if raw is not None and raw.in_transaction:
            raw.execute(statement)
    finally:
        _release(connection)
    path = _STORE_FILES.get(connection.engine)
    if rings and statement == "COMMIT" and path is not None:
        ring(path)


def _release(connection: Connection) -> None:
    lock = connection.info.pop(_WRITE_LOCK, None)
    if lock is not None:
        lock.release()


_LONGEST_ADDRESS = 100
"""Bytes of a socket path every platform takes (Linux 107, macOS and the BSDs 103)."""


def ring(store: Path) -> None:
    """Wake every process waiting beside the SQLite file ``store``; call after the commit."""
    directory = _directory(store)
    try:
        names = os.listdir(directory)
    except OSError:
        return  # nobody has ever waited beside this store
    _ring([directory / name for name in names])


class Doorbell:
    """This process's socket beside a store file, rung by :func:`ring`."""

    def __init__(self, path: Path, sock: socket.socket) -> None:
        self._path = path
        self._socket = sock

    @classmethod
    def open(cls, store: Path | None) -> Doorbell | None:
        """A bound doorbell, or None where the mechanism is unavailable (poll instead)."""
        if store is None or not hasattr(socket, "AF_UNIX"):
            return None
        directory = _directory(store)
        path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock"
        if len(os.fsencode(path)) > _LONGEST_ADDRESS:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            mode = _store_mode(store)
            with contextlib.suppress(FileExistsError):
                directory.mkdir()
                # Searchable wherever readable: whoever may read the store may list the doorbells.
                with contextlib.suppress(OSError):
                    os.chmod(directory, mode | 0o700 | ((mode & 0o444) >> 2))
            sock.bind(str(path))
            # As SQLite gives its -wal and -shm files: whoever may write the store may ring.
            os.chmod(path, mode)
        except OSError:
            sock.close()
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return cls(path, sock)

    def wait(self, timeout: float | None) -> bool:
        """Sleep until rung (rings meanwhile count as one) or ``timeout`` seconds (None: no
        limit); whether it was rung."""
        self._socket.settimeout(timeout)
        try:
            self._socket.recv(16)
        except TimeoutError:
            return False
        self._socket.setblocking(False)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while True:
                self._socket.recv(16)
        return True

    def interrupt(self) -> None:
        """Ring this doorbell alone: a waiter on another thread of this process returns."""
        _ring([self._path])

    def close(self) -> None:
        self._socket.close()
        with contextlib.suppress(OSError):
            self._path.unlink()


def _ring(paths: list[Path]) -> None:
    if not paths or not hasattr(socket, "AF_UNIX"):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for path in paths:
            try:
                sender.sendto(b"!", str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                # Its process has gone: nobody will read it again.
                if path.suffix == ".sock":
                    with contextlib.suppress(OSError):
                        path.unlink()
            except OSError:
                pass  # its queue is full (a ring is already waiting) or it is not ours to ring


def _directory(store: Path) -> Path:
    return store.with_name(f"{store.name}-signals")


def _store_mode(store: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(store).st_mode) & 0o666
    except OSError:
        return 0o644  # not created yet: SQLite makes it 0644 under the usual umask
