"""Whose clock says what time it is.

The firing loop reads the time once per tick and passes it down. On PostgreSQL that time is the
database's (see :mod:`jobhost.store.engine`), so a replica whose own clock is wrong neither runs an
occurrence early nor twice; on SQLite, where every process shares one machine, it is the host's
clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "SystemClock", "utc_instant"]

Clock = Callable[[], datetime]
"""Returns an aware UTC instant."""


class SystemClock:
    """The machine's clock, shifted by ``offset`` (zero except in tests of a wrong clock)."""

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset = offset

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def utc_instant(value: datetime) -> datetime:
    """``value`` in UTC, as the store keeps every instant; a naive one is refused."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r} cannot be stored; use an aware UTC time")
    return value if value.tzinfo is UTC else value.astimezone(UTC)
