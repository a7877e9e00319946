"""What differs between the store's two databases: one implementation each,
:mod:`jobhost.store.postgres` and :mod:`jobhost.store.sqlite`, picked by
:func:`jobhost.store.engine.database`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Table
from sqlalchemy.engine import URL, Connection, Engine

from jobhost.clock import Clock
from jobhost.store.pooling import PoolingMode

_Q = TypeVar("_Q")


class Database(Protocol):
    batches: bool
    """Whether a batch of any size travels as one parameter (JSON rows, arrays) of one text
    the server plans once; elsewhere as an executemany or a bind parameter a value."""
    listens: bool
    """Whether hosts hear a change by ``LISTEN``; elsewhere they read the counter."""
    own_clock: bool
    """Whether the database keeps the store's time; elsewhere the host's clock does."""
    typed: bool
    """Whether a column holds only values of its type, an instant as a time (not text)."""
    lateral: bool
    """Whether a LATERAL subquery with a LIMIT is probed a row at a time, where a plain join
    is planned as a hash join over the whole table."""
    marker: str
    """The driver's parameter marker in a raw statement."""

    def open(
        self,
        url: URL,
        create: bool,
        options: dict[str, Any],
        *,
        connect_timeout: float,
        statement_timeout: float,
        idle_transaction_timeout: float,
        pooling: PoolingMode,
        listen_url: str | None,
    ) -> Engine:
        """An engine for the store at ``url``, as
        :func:`~jobhost.store.engine.create_store_engine` describes it."""
        ...

    def now(self, connection: Connection, fallback: Clock) -> datetime: ...

    def locked(self, query: _Q, **for_update: Any) -> _Q:
        """``query`` locking its rows (``with_for_update``) where the database locks rows."""
        ...

    def insert(self, table: Table) -> Any:
        """An INSERT into ``table`` that knows ON CONFLICT."""
        ...

    def notify(self, connection: Connection) -> None:
        """Wake every host once the surrounding transaction commits."""
        ...

    def joined(self, value: Any, separator: str, *order: Any) -> ColumnElement[Any]:
        """The texts ``value`` joined by ``separator`` in ``order``, an aggregate."""
        ...


def utc_instant(value: datetime) -> datetime:
    """``value`` in UTC, as the store keeps every instant; a naive one is refused."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r} cannot be stored; use an aware UTC time")
    return value if value.tzinfo is UTC else value.astimezone(UTC)
