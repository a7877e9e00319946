"""A deadline, kept by the client, on every wait for the PostgreSQL server: a backend hung
behind a live TCP peer (a pooler, a proxy) acknowledges every byte, so neither
``statement_timeout`` nor keepalives end the wait. A connection gives up after ``seconds``,
closing itself with :class:`psycopg.OperationalError` (a disconnect to SQLAlchemy): a cancel
request would travel to the same hung peer. Imported only for PostgreSQL, so SQLite's hosts do
not load psycopg."""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.abc import PQGen
from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["DeadlineConnection", "keep_deadline", "listener"]

_RV = TypeVar("_RV")
_WAIT_INTERVAL = 0.1
"""psycopg's own: how often a wait looks for a signal to handle (SIGTERM, Ctrl-C)."""


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait for the server ends after :attr:`deadline`."""

    deadline: float | None = None
    """Seconds; None: wait as long as the server takes (a migration)."""

    def wait(
        self, gen: PQGen[_RV], interval: float = _WAIT_INTERVAL, timeout: float | None = None
    ) -> _RV:
        if timeout is not None or self.deadline is None:
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, self.deadline)
        except errors._WaitTimeout:  # psycopg's own, raised by its wait functions
            # Mid-protocol: nothing more can be read from it that makes sense.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the store did not answer within {self.deadline:g}s (client-side deadline: "
                "store_statement_timeout plus a margin); the connection was closed"
            ) from None


def keep_deadline(engine: Engine, seconds: float, connect_args: dict[str, Any]) -> None:
    """Make every connection ``engine`` opens a :class:`DeadlineConnection` with ``seconds``;
    ``connect_args``: the libpq timeouts its :func:`listener` connects with too."""
    _LISTENERS[engine] = (seconds, connect_args)

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> DeadlineConnection:
        connection = DeadlineConnection.connect(*cargs, **cparams)
        connection.deadline = seconds
        return connection

    @event.listens_for(engine, "checkin")
    def _restore(dbapi_connection: Any, _record: Any) -> None:
        # A migration lifts it for its own transaction (jobhost.store.engine.lift_deadline).
        if isinstance(dbapi_connection, DeadlineConnection):
            dbapi_connection.deadline = seconds


def listener(engine: Engine, dsn: str) -> DeadlineConnection:
    """An autocommit connection to ``dsn`` for ``LISTEN``, with the deadline and the connect
    timeouts of ``engine``'s own connections (none where it keeps no deadline)."""
    seconds, connect_args = _LISTENERS.get(engine, (None, {}))
    connection = DeadlineConnection.connect(dsn, autocommit=True, **connect_args)
    connection.deadline = seconds
    return connection


_LISTENERS: weakref.WeakKeyDictionary[Engine, tuple[float, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
