"""The store's time: the database's clock on PostgreSQL, the host's on SQLite.

See :mod:`jobhost.clock` for why.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock

__all__ = ["StoreTime", "database_now", "store_now"]


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
