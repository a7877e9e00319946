"""Instants an operator may write, kept where arithmetic on them cannot overflow.

Python's datetimes end at years 1 and 9999, so bounds a caller writes (a backfill's range, a
``since``, a cursor) are accepted from year 2 to year 9998: a day's margin for any offset and step.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["FIRST_SAFE", "LAST_SAFE", "SAFE_RANGE_TEXT", "safe_utc"]

FIRST_SAFE = datetime(2, 1, 1, tzinfo=UTC)
LAST_SAFE = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
SAFE_RANGE_TEXT = "from year 2 to year 9998"


def safe_utc(instant: datetime) -> datetime | None:
    """``instant`` (aware) in UTC, or None outside :data:`FIRST_SAFE` .. :data:`LAST_SAFE`."""
    # A local year inside the range keeps the conversion from overflowing.
    if not FIRST_SAFE.year <= instant.year <= LAST_SAFE.year:
        return None
    utc = instant.astimezone(UTC)
    return utc if FIRST_SAFE <= utc <= LAST_SAFE else None
