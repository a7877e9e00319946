"""Instants an operator may write, kept where arithmetic on them cannot overflow.

Python's datetimes end at years 1 and 9999: converting ``0001-01-01T00:00+01:00`` to UTC, or
stepping a microsecond back from the first instant, raises ``OverflowError``. Bounds written by
a caller (a backfill's range, a failure list's ``since``, a cursor) are therefore accepted only
from year 2 to year 9998, a day's margin on either side for any offset and any step the trigger
math takes.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["FIRST_SAFE", "LAST_SAFE", "SAFE_RANGE_TEXT", "safe_utc"]

FIRST_SAFE = datetime(2, 1, 1, tzinfo=UTC)
LAST_SAFE = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
SAFE_RANGE_TEXT = "from year 2 to year 9998"


def safe_utc(instant: datetime) -> datetime | None:
    """``instant`` (aware) in UTC, or None when it lies outside :data:`FIRST_SAFE` ..
    :data:`LAST_SAFE`."""
    # A local year inside the range keeps the UTC one within a day of it, so the conversion
    # below cannot overflow (an offset is less than a day).
    if not FIRST_SAFE.year <= instant.year <= LAST_SAFE.year:
        return None
    utc = instant.astimezone(UTC)
    return utc if FIRST_SAFE <= utc <= LAST_SAFE else None
