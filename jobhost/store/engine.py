"""Opening the store: one engine per process, tuned for each backend.

SQLite is the embedded default: every transaction takes the write lock at BEGIN (``BEGIN
IMMEDIATE``) so that a claim is atomic across processes sharing the file, and WAL lets readers
(``jobhost report``) proceed meanwhile. PostgreSQL is the engine for several replicas; a bare
``postgresql://`` URL is given the psycopg 3 driver.

On PostgreSQL every wait for the server also has a deadline kept by the client
(:mod:`jobhost.store.deadline`): the statement timeout plus :data:`DEADLINE_MARGIN`, so that a
server hung behind a live TCP peer costs a connection, never a thread.

A store file this process may not write (the file, or its directory, where SQLite keeps the
WAL) is opened read-only: the commands that only read (``report``, ``history``, ``health``) work,
and :func:`is_read_only` lets a command that writes refuse with a clear message up front.

The store's time is the database's clock on PostgreSQL, the host's on SQLite (see
:mod:`jobhost.clock` for why).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import OperationalError

from jobhost.clock import Clock
from jobhost.store.doorbell import ring
from jobhost.store.pooling import Pooling, PoolingMode, option_pairs, set_locally

__all__ = [
    "DEADLINE_MARGIN",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TRANSACTION_TIMEOUT",
    "DEFAULT_STATEMENT_TIMEOUT",
    "StoreTime",
    "answers",
    "create_store_engine",
    "database_now",
    "is_postgres",
    "lift_deadline",
    "normalise_url",
    "reading",
    "ring_after_commit",
    "store_file",
    "store_now",
]

_SQLITE_BUSY_MS = 30_000
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds; the ``store_connect_timeout`` setting's default."""
DEFAULT_STATEMENT_TIMEOUT = 60.0
"""Seconds; the ``store_statement_timeout`` setting's default."""
DEFAULT_IDLE_TRANSACTION_TIMEOUT = 60.0
"""Seconds; the ``lease_duration`` setting's default, which a host's engine uses."""
DEADLINE_MARGIN = 5.0
"""Seconds the client waits for a statement beyond the server's own timeout: the server's
cancellation, and its answer saying so, arrive first whenever the server is there to send it."""
_ANSWER_FRESH = 1.0
"""Seconds one look of :func:`answers` stands for every caller."""
_READ_ONLY = "jobhost_read_only"
_READ_ONLY_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
_WRITE_LOCK = "jobhost_write_lock"
_RING = "jobhost_ring"
# One lock per SQLite file, shared by every engine of this process on it.
_FILE_LOCKS: dict[str, threading.RLock] = {}
_ENGINE_LOCKS: weakref.WeakKeyDictionary[Engine, threading.RLock] = weakref.WeakKeyDictionary()
# The file each SQLite engine opened: a command's URL names it as a ``file:`` URI (read-only, or
# refusing to create it), which no longer says where the file and its doorbells are.
_STORE_FILES: weakref.WeakKeyDictionary[Engine, Path] = weakref.WeakKeyDictionary()


def create_store_engine(
    url: str | URL,
    *,
    create: bool = True,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
    idle_transaction_timeout: float = DEFAULT_IDLE_TRANSACTION_TIMEOUT,
    pooling: PoolingMode = "none",
    listen_url: str | None = None,
    **options: Any,
) -> Engine:
    """An engine for the store at ``url`` (SQLite or PostgreSQL).

    Without ``create``, connecting to an SQLite file that does not exist fails instead of making
    a new, empty one. On PostgreSQL, ``connect_timeout`` (seconds) bounds opening a connection,
    waiting for a free one in the pool, and data the server does not acknowledge (a network
    that drops packets); ``statement_timeout`` bounds each statement on the server; 0 turns
    either off. ``idle_transaction_timeout`` ends, on the server, a transaction left idle that
    long (0: never): a process frozen inside a transaction (stopped, swapped out, a stalled VM)
    would otherwise keep its rows locked, and every other replica skips locked rows, so the
    runs of a host frozen past its lease could not be taken over until it thawed. SQLite waits
    for its write lock up to its own busy timeout, threads of this process likewise. Every wait
    for a PostgreSQL server ends after ``statement_timeout`` plus :data:`DEADLINE_MARGIN` (none
    when ``statement_timeout`` is 0); see :mod:`jobhost.store.deadline`. ``pooling`` and
    ``listen_url``: PostgreSQL behind a transaction-mode pooler (:mod:`jobhost.store.pooling`).
    """
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(parsed)
        read_only = path is not None and _not_writable(path)
        connect_args: dict[str, Any] = {
            "timeout": _SQLITE_BUSY_MS / 1000,
            "check_same_thread": False,
        }
        if read_only and path is not None:
            parsed = _read_only_url(parsed, path)
        elif not create and path is not None:
            parsed = parsed.set(database=f"file:{quote(str(path))}").update_query_dict(
                {"mode": "rw", "uri": "true"}
            )
        engine = create_engine(parsed, connect_args=connect_args, **options)
        if read_only:
            _READ_ONLY_ENGINES.add(engine)
        # Threads of one process queue for the write lock here, woken the moment it is free,
        # instead of sleeping in SQLite's busy handler between tries.
        key = str(path) if path is not None else f"memory:{id(engine)}"
        _ENGINE_LOCKS[engine] = _FILE_LOCKS.setdefault(key, threading.RLock())
        if path is not None:
            _STORE_FILES[engine] = path
        event.listen(
            engine, "connect", _sqlite_on_connect_read_only if read_only else _sqlite_on_connect
        )
        event.listen(engine, "begin", _sqlite_on_begin)
        event.listen(engine, "commit", _sqlite_on_commit)
        event.listen(engine, "rollback", _sqlite_on_rollback)
        return engine
    options.setdefault("pool_pre_ping", True)
    options.setdefault("pool_size", 10)
    if connect_timeout > 0:
        options.setdefault("pool_timeout", connect_timeout)
    server = _server_settings(statement_timeout, idle_transaction_timeout)
    if pooling == "transaction":
        # Nothing may live in the session: the pooler lends it to others between transactions.
        pooled = Pooling(pooling, listen_url)
        server = {**option_pairs(parsed), **server}
        parsed = parsed.difference_update_query(["options"])
        args = {**_connect_timeouts(connect_timeout), "prepare_threshold": None}
    else:
        pooled = Pooling(pooling, listen_url, session=tuple(server.items()))
        args = {**_connect_timeouts(connect_timeout), **_startup_options(parsed, server)}
        server = {}
    options["connect_args"] = {**args, **options.get("connect_args", {})}
    engine = create_engine(parsed, **options)
    set_locally(engine, pooled, server)
    if statement_timeout > 0:
        from jobhost.store.deadline import keep_deadline

        deadline = statement_timeout + DEADLINE_MARGIN
        keep_deadline(engine, deadline, _connect_timeouts(connect_timeout))
    return engine


def lift_deadline(connection: Connection) -> None:
    """No client-side deadline on ``connection`` until it goes back to the pool (a migration,
    which may take longer than any statement of the store's operations)."""
    raw: Any = connection.connection.dbapi_connection
    if hasattr(raw, "deadline"):
        raw.deadline = None


def answers(engine: Engine, within: float = 1.0) -> bool:
    """Whether the store answered a trivial read within ``within`` seconds, lately.

    One look at a time per engine, on a thread of its own, and its answer stands for
    :data:`_ANSWER_FRESH` seconds: a caller waits at most ``within`` however the store hangs,
    and callers in a crowd cost one read a second. A look still waiting is a store that does
    not answer.
    """
    look = _LOOKS.setdefault(engine, _Look())
    return look.answered(engine, within)


class _Look:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._done.set()
        self._ok = True
        self._at = -_ANSWER_FRESH

    def answered(self, engine: Engine, within: float) -> bool:
        with self._lock:
            if self._done.is_set() and time.monotonic() - self._at >= _ANSWER_FRESH:
                self._done.clear()
                threading.Thread(
                    target=self._look, args=(engine,), name="jobhost-store-look", daemon=True
                ).start()
            done = self._done
        return done.wait(within) and self._ok

    def _look(self, engine: Engine) -> None:
        ok = False
        try:
            with reading(engine) as connection:
                connection.exec_driver_sql("SELECT 1")
            ok = True
        except Exception:  # the store's error is the caller's to meet and say, not this look's
            ok = False
        finally:
            self._ok, self._at = ok, time.monotonic()
            self._done.set()


_LOOKS: weakref.WeakKeyDictionary[Engine, _Look] = weakref.WeakKeyDictionary()


def _server_settings(statement: float, idle_transaction: float) -> dict[str, str]:
    """The server settings the store's timeouts ask for (0: off, not sent), in milliseconds."""
    wanted = {
        "statement_timeout": statement,
        "idle_in_transaction_session_timeout": idle_transaction,
    }
    return {name: str(round(seconds * 1000)) for name, seconds in wanted.items() if seconds > 0}


def _connect_timeouts(connect: float) -> dict[str, Any]:
    """libpq's parameters for opening a connection and finding a dead peer."""
    if connect <= 0:
        return {}
    return {
        "connect_timeout": max(2, round(connect)),  # libpq's least
        "tcp_user_timeout": round(connect * 1000),
        # A connection whose peer vanished is found within about ``connect`` seconds idle.
        "keepalives": 1,
        "keepalives_idle": max(1, round(connect / 2)),
        "keepalives_interval": max(1, round(connect / 6)),
        "keepalives_count": 3,
    }


def _startup_options(url: URL, server: dict[str, str]) -> dict[str, Any]:
    """libpq's ``options`` for the server settings and the session's zone; the URL's own
    ``options`` are kept."""
    wanted = " ".join(f"-c {name}={value}" for name, value in server.items())
    given = url.query.get("options", "")
    given = given if isinstance(given, str) else " ".join(given)
    # The session's zone is UTC unless the URL's options name another (theirs come after, and
    # win). The driver then decodes each instant straight to UTC; under any other zone name (a
    # server's default ``Etc/UTC`` too) it makes a zoned value that every read moves to UTC
    # again: a third of the time of reading 10,000 schedule rows. Nothing the store does
    # depends on the session's zone: every time is a timestamptz, compared as an instant. An
    # engine with no server setting to send sends no options at all, as before.
    if not (wanted or given):
        return {}
    return {"options": f"-c TimeZone=UTC {given} {wanted}".strip()}


def normalise_url(url: str | URL) -> URL:
    """The URL with the psycopg 3 driver named for PostgreSQL."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def reading(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite it does not take the write lock."""
    return engine.connect().execution_options(**{_READ_ONLY: True})


def ring_after_commit(connection: Connection) -> None:
    """SQLite: once this transaction commits, wake the processes waiting beside the file (see
    :mod:`jobhost.store.doorbell`); a rollback rings nobody."""
    connection.info[_RING] = True


def store_file(engine: Engine) -> Path | None:
    """The SQLite file the engine opened, absolute; None for PostgreSQL or an in-memory
    database. Unlike :func:`sqlite_path` of ``engine.url``, it knows the file of an engine whose
    URL is a ``file:`` URI (every command's, see :func:`create_store_engine`)."""
    return _STORE_FILES.get(engine)


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def is_read_only(engine: Engine) -> bool:
    """Whether the engine's SQLite file was opened read-only (this process may not write it)."""
    return engine in _READ_ONLY_ENGINES


def database_now(connection: Connection, fallback: Clock) -> datetime:
    """The database's current instant on PostgreSQL; ``fallback()`` on SQLite."""
    if connection.dialect.name != "postgresql":
        return fallback()
    value = connection.execute(text("SELECT clock_timestamp()")).scalar_one()
    assert isinstance(value, datetime)
    return value.astimezone(UTC)


def store_now(engine: Engine, fallback: Clock) -> datetime:
    """:func:`database_now` in a short read of its own."""
    if engine.dialect.name != "postgresql":
        return fallback()
    with engine.connect() as connection:
        return database_now(connection, fallback)


class StoreTime:
    """The store's time as one host keeps it: read from the store now and then, and estimated
    in between without asking. On PostgreSQL the estimate is the last reading moved on by this
    process's monotonic clock (the first estimate asks); on SQLite it is the host's clock, which
    is the store's."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._local = engine.dialect.name != "postgresql"
        self._read_at: tuple[datetime, float] | None = None

    def estimate(self) -> datetime:
        if self._local:
            return self._clock()
        if self._read_at is None:
            return self.read()
        read, at = self._read_at
        return read + timedelta(seconds=time.monotonic() - at)

    def read(self) -> datetime:
        """Ask the store (see :func:`store_now`), and note the answer."""
        return self.noted(store_now(self._engine, self._clock), time.monotonic())

    def noted(self, now: datetime, at: float) -> datetime:
        """Note ``now`` as the store's time read at ``at`` (monotonic), as a claim read it."""
        self._read_at = (now, at)
        return now


def sqlite_path(url: str | URL) -> Path | None:
    """The file of an SQLite URL, absolute; None for PostgreSQL or an in-memory database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in {"", ":memory:"} or database.startswith("file:") or "mode=memory" in database:
        return None
    return Path(database).expanduser().absolute()


def _not_writable(path: Path) -> bool:
    # SQLite in WAL mode writes beside the file (-wal, -shm): the directory counts too.
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _read_only_url(url: URL, path: Path) -> URL:
    # With no WAL file beside it, nothing is pending: the file alone is the whole store, and
    # "immutable" lets SQLite read it without creating the -shm it has no right to create.
    wal = path.with_name(path.name + "-wal")
    query = {"mode": "ro", "uri": "true"}
    if not wal.exists():
        query["immutable"] = "1"
    return url.set(database=f"file:{quote(str(path))}").update_query_dict(query)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's begin event issue BEGIN itself, instead of pysqlite's deferred BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_connect_read_only(dbapi_connection: Any, _record: Any) -> None:
    # No journal-mode change: it would be a write.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    if connection.get_execution_options().get(_READ_ONLY) or is_read_only(connection.engine):
        connection.exec_driver_sql("BEGIN")
        return
    lock = _ENGINE_LOCKS[connection.engine]
    # Bounded as SQLite's own wait for the file's lock is: a thread of this process stuck in its
    # transaction makes the others fail as a locked store, not wait for ever.
    if not lock.acquire(timeout=_SQLITE_BUSY_MS / 1000):
        # As SQLAlchemy reports SQLite's own busy timeout, so every caller judges it the same.
        locked = sqlite3.OperationalError("database is locked")
        raise OperationalError("BEGIN IMMEDIATE", None, locked)
    connection.info[_WRITE_LOCK] = lock
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        _release(connection)
        raise


def _sqlite_on_commit(connection: Connection) -> None:
    # The commit event comes before the driver's commit: end the transaction here, so the
    # lock is released only once the write is durable and the file's lock is free.
    _end(connection, "COMMIT")


def _sqlite_on_rollback(connection: Connection) -> None:
    _end(connection, "ROLLBACK")


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
    path = store_file(connection.engine)
    if rings and statement == "COMMIT" and path is not None:
        ring(path)


def _release(connection: Connection) -> None:
    lock = connection.info.pop(_WRITE_LOCK, None)
    if lock is not None:
        lock.release()
