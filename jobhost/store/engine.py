"""Opening the store: one engine per process, tuned for each backend.

SQLite is the embedded default: every transaction takes the write lock at BEGIN (``BEGIN
IMMEDIATE``) so that a claim is atomic across processes sharing the file, and WAL lets readers
(``jobhost report``) proceed meanwhile. PostgreSQL is the engine for several replicas; a bare
``postgresql://`` URL is given the psycopg 3 driver.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url

__all__ = ["create_store_engine", "is_postgres", "normalise_url", "reading"]

_SQLITE_BUSY_MS = 30_000
_READ_ONLY = "jobhost_read_only"
_WRITE_LOCK = "jobhost_write_lock"
_WRITE_LOCKS: dict[str, threading.RLock] = {}


def create_store_engine(url: str | URL, **options: Any) -> Engine:
    """An engine for the store at ``url`` (SQLite or PostgreSQL)."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            parsed,
            connect_args={"timeout": _SQLITE_BUSY_MS / 1000, "check_same_thread": False},
            **options,
        )
        # Threads of one process queue for the write lock here, woken the moment it is free,
        # instead of sleeping in SQLite's busy handler between tries.
        _WRITE_LOCKS.setdefault(parsed.database or "", threading.RLock())
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        event.listen(engine, "commit", _sqlite_on_commit)
        event.listen(engine, "rollback", _sqlite_on_rollback)
        return engine
    options.setdefault("pool_pre_ping", True)
    options.setdefault("pool_size", 10)
    return create_engine(parsed, **options)


def normalise_url(url: str | URL) -> URL:
    """The URL with the psycopg 3 driver named for PostgreSQL."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def reading(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite it does not take the write lock."""
    return engine.connect().execution_options(**{_READ_ONLY: True})


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's begin event issue BEGIN itself, instead of pysqlite's deferred BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    if connection.get_execution_options().get(_READ_ONLY):
        connection.exec_driver_sql("BEGIN")
        return
    lock = _WRITE_LOCKS[connection.engine.url.database or ""]
    lock.acquire()
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
    if _WRITE_LOCK not in connection.info:
        return
    try:
        raw: Any = connection.connection.dbapi_connection
        if raw is not None and raw.in_transaction:
            raw.execute(statement)
    finally:
        _release(connection)


def _release(connection: Connection) -> None:
    lock = connection.info.pop(_WRITE_LOCK, None)
    if lock is not None:
        lock.release()
