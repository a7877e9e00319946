"""How instants and durations are written for operators: UTC with ``Z``, local with its zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import TypeVar

from jobhost.triggers import UnknownTimezoneError, load_zone

__all__ = ["duration_text", "iso_local", "iso_utc", "known_zone", "short_local", "short_utc"]

_None = TypeVar("_None", bound=None)


def iso_utc(value: datetime | _None) -> str | _None:
    """``2026-05-04T10:00:00Z`` (microseconds kept when present), or None."""
    if value is None:
        return value
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_local(value: datetime | None, zone: str) -> str | None:
    """``2026-05-04T12:00:00+02:00``; in UTC for a zone this machine does not know."""
    tz = known_zone(zone)
    if value is None or tz is None:
        return iso_utc(value)
    return value.astimezone(tz).isoformat()


def short_local(value: datetime | None, zone: str) -> str:
    """``2026-05-04 12:00:00 CEST`` for tables; ``-`` for nothing."""
    tz = known_zone(zone)
    if value is None or tz is None:
        return short_utc(value)
    return value.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def known_zone(zone: str) -> tzinfo | None:
    try:
        return load_zone(zone)
    except UnknownTimezoneError:
        return None


def short_utc(value: datetime | None) -> str:
    """``2026-05-04 10:00:00Z`` for tables; ``-`` for nothing."""
    if value is None:
        return "-"
    value = value.astimezone(UTC)
    if value.year < 1000:
        return value.strftime("%Y-%m-%d %H:%M:%SZ")  # the year unpadded, as strftime writes it
    # The same text, in half the time: a summary writes thousands of these (overdue and late
    # jobs' reasons).
    return value.isoformat(sep=" ", timespec="seconds")[:19] + "Z"


def duration_text(value: timedelta | float | None) -> str:
    """``350ms``, ``12.3s``, ``4m05s``, ``2h10m``, ``3d4h``; ``-`` for nothing."""
    if value is None:
        return "-"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600}h"
