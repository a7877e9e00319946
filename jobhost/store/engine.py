"""Opening the store: one engine per process, tuned for each backend.

SQLite is the embedded default: every transaction takes the write lock at BEGIN (``BEGIN
IMMEDIATE``) so that a claim is atomic across processes sharing the file, and WAL lets readers
(``jobhost report``) proceed meanwhile. PostgreSQL is the engine for several replicas; a bare
``postgresql://`` URL is given the psycopg 3 driver.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url

__all__ = ["create_store_engine", "is_postgres", "normalise_url", "reading"]

_SQLITE_BUSY_MS = 30_000
_READ_ONLY = "jobhost_read_only"


def create_store_engine(url: str | URL, **options: Any) -> Engine:
    """An engine for the store at ``url`` (SQLite or PostgreSQL)."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            parsed,
            connect_args={"timeout": _SQLITE_BUSY_MS / 1000, "check_same_thread": False},
            **options,
        )
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
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
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
