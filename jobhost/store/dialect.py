"""What differs between the store's two databases: one implementation each,
:mod:`jobhost.store.postgres` and :mod:`jobhost.store.sqlite`, picked by
:func:`jobhost.store.engine.database`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Table
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

from jobhost.clock import Clock
from jobhost.store.pooling import PoolingMode

_Q = TypeVar("_Q")


class Database(Protocol):
    batches: bool
    """Whether a batch of any size travels as one parameter (JSON rows, arrays) of one text
    the server plans once; elsewhere as an executemany or a bind parameter a value."""
    listens: bool
    """Whether hosts hear a change by ``LISTEN``; elsewhere they read the counter."""
    server: bool
    """Whether the database is a server: its clock is the store's, and it answers each
    connection in a process of its own, beside this one's work; elsewhere it answers in this
    process, and the host's clock is the store's."""
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

    def now(self, connection: Connection, fallback: Clock) -> datetime:
        """The store's instant: the database's clock on a server, else ``fallback()``."""
        ...

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

    def channel(self, connection: Connection) -> str:
        """The channel the store's transactions notify, as the connection's schema names it
        (a direct listener's URL need not repeat the store's search path); where nobody
        listens (:attr:`listens` false), never asked."""
        ...

    def store_file(self, engine: Engine) -> Path | None:
        """The file the engine opened, absolute, beside which its doorbell rings; None for a
        server or an in-memory database."""
        ...

    @property
    def instant_type(self) -> TypeEngine[Any]:
        """The column type of :class:`~jobhost.store.engine.UTCDateTime`."""
        ...

    @staticmethod
    def bind_instant(value: datetime | None) -> Any:
        """An aware instant, or None, as the driver is given it; a naive one is refused."""
        ...

    def read_instant(
        self, slow: Callable[[Any, Dialect], datetime | None], dialect: Dialect
    ) -> Callable[[Any], datetime | None]:
        """The driver's value as an aware instant in UTC; ``slow`` reads what the fast path
        cannot (a naive value, or none that is a time)."""
        ...
