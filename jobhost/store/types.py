"""Column types shared by the schema."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = ["UTCDateTime", "utc_instant"]

_log = logging.getLogger("jobhost.store")
# SQLAlchemy's own SQLite layout: fixed width, so text order is time order in comparisons.
_SQLITE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


class UTCDateTime(TypeDecorator[datetime]):
    """An instant, stored in UTC, always returned timezone-aware.

    PostgreSQL keeps ``timestamptz``. SQLite has no time type, so the value is naive UTC text;
    text that is not a time (a hand edit, a broken restore) is reported and read as missing, so
    the loop repairs the row instead of failing on it. A naive value going in is refused: every
    instant in the host is aware, and a naive one is a bug that would be off by the local offset.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(32))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = utc_instant(value)
        if dialect.name == "sqlite":
            # The same text as _SQLITE_FORMAT gives, several times faster on the hot path.
            return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        return value

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """A direct conversion of each value: reports read a hundred thousand of these, and the
        generic path costs several calls per value, a missing one included. On SQLite a parse
        of the stored text; on PostgreSQL the driver's aware instant, moved to UTC."""
        slow = self.process_result_value
        if dialect.name != "sqlite":
            if self.impl_instance.result_processor(dialect, coltype) is not None:
                return super().result_processor(dialect, coltype)
            utc = UTC

            def aware(value: Any) -> datetime | None:
                if value is None:
                    return None
                if type(value) is datetime and value.tzinfo is not None:
                    return value.astimezone(utc)
                return slow(value, dialect)  # naive, or not a time: the generic path

            return aware
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

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                _log.warning("stored time %r is not a time; treating it as missing", value)
                return None
        if not isinstance(value, datetime):
            _log.warning("stored time %r is not a time; treating it as missing", value)
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utc_instant(value: datetime) -> datetime:
    """``value`` in UTC, as the store keeps every instant; a naive one is refused."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r} cannot be stored; use an aware UTC time")
    return value if value.tzinfo is UTC else value.astimezone(UTC)
