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
# Instants whose SQLite text is remembered (a few hundred kilobytes): enough for a record of
# a thousand runs to find its starts and ends again; past this the memory starts again.
_REMEMBERED_TEXTS = 4096


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

    def bind_processor(self, dialect: Dialect) -> Any:
        """A direct conversion of each value, as :meth:`result_processor` is; on SQLite the
        remembered text of each instant (see :func:`_sqlite_text`)."""
        return _sqlite_text_or_none if dialect.name == "sqlite" else _aware_or_none

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "sqlite":
            return _sqlite_text(value)
        return utc_instant(value)

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
                    # The store's sessions are in UTC: nearly every value is already there.
                    return value if value.tzinfo is utc else value.astimezone(utc)
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


def _aware_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else utc_instant(value)


def _sqlite_text_or_none(value: datetime | None) -> str | None:
    return None if value is None else _sqlite_text(value)


def _sqlite_text(value: datetime) -> str:
    """The SQLite text of ``value``, remembered: a claim of a thousand runs binds the same few
    instants (the occurrence, now, the lease's end) thousands of times, and a record binds each
    run's start and end twice (the run's row, then its job's summary). Formatting one costs a
    microsecond or two; looking it up, a twentieth of that. Shared by every column and thread:
    a dict's get and set are atomic, and two threads formatting one instant write one text."""
    # A naive value equals no aware key, so it misses here and utc_instant refuses it.
    known = _TEXTS.get(value)
    if known is None:
        # The same text as _SQLITE_FORMAT gives, several times faster.
        known = utc_instant(value).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        if len(_TEXTS) >= _REMEMBERED_TEXTS:
            _TEXTS.clear()
        _TEXTS[value] = known
    return known


_TEXTS: dict[datetime, str] = {}
