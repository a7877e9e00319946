"""The one place that imports APScheduler: cron fields as a wall-clock calendar.

APScheduler 3 is untyped and resolves daylight saving differently from Debian cron, so it only
sees UTC here: a wall time goes in dressed as UTC and comes out so (``_daylight`` maps wall
times to instants). Fields that match every day need no APScheduler trigger at all, which is
most of what a catalog's first occurrences cost at start-up.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, NamedTuple

__all__ = ["ALL_DAYS", "ALL_WEEKDAYS", "CronFields", "WallCalendar"]

# APScheduler counts weekdays from Monday (0) and rejects 7; names avoid both traps.
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY = 86_400
ALL_DAYS = frozenset(range(1, 32))
_ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))


class CronFields(NamedTuple):
    """The values of cron's fields (cron's numbering: Sunday is 0); with ``either_day`` a day
    matches when its day of month OR its day of week does."""

    second: frozenset[int]
    minute: frozenset[int]
    hour: frozenset[int]
    day_of_month: frozenset[int]
    month: frozenset[int]
    day_of_week: frozenset[int]
    either_day: bool


class WallCalendar:
    """The wall times ``fields`` match."""

    def __init__(self, fields: CronFields) -> None:
        self._fields = fields
        # Built at the first question: most expressions validated at start-up are asked later.
        self._built: Any = None
        every_day = fields[3:6] == (ALL_DAYS, _ALL_MONTHS, ALL_WEEKDAYS)  # day, month, weekday
        self._daily = _TimesOfDay(*fields[:3]) if every_day else None

    def next_at_or_after(self, wall: int) -> int | None:
        """The first matching wall time at or after ``wall`` (seconds, as if UTC)."""
        if self._daily is not None:
            return self._daily.next_at_or_after(wall)
        trigger = self._built if self._built is not None else self._build()
        fire = trigger.get_next_fire_time(None, datetime.fromtimestamp(wall, UTC))
        if fire is None:
            return None
        # Whole seconds, which a float holds exactly through the year 9999.
        return int(fire.timestamp())

    def _build(self) -> Any:
        # Imported here: a command that asks no fire time never loads APScheduler.
        from apscheduler.triggers.combining import OrTrigger
        from apscheduler.triggers.cron import CronTrigger

        second, minute, hour, day_of_month, month, day_of_week, either_day = self._fields
        common = {
            "second": _numbers(second, 0, 59),
            "minute": _numbers(minute, 0, 59),
            "hour": _numbers(hour, 0, 23),
            "month": _numbers(month, 1, 12),
            "timezone": UTC,
        }
        days = _numbers(day_of_month, 1, 31)
        monday_first = sorted({(day - 1) % 7 for day in day_of_week})
        names = [_WEEKDAYS[day] for day in monday_first]
        weekdays = "*" if len(monday_first) == 7 else ",".join(_runs(monday_first, names))
        trigger: Any
        if either_day:
            trigger = OrTrigger(
                [
                    CronTrigger(day=days, day_of_week="*", **common),
                    CronTrigger(day="*", day_of_week=weekdays, **common),
                ]
            )
        else:
            trigger = CronTrigger(day=days, day_of_week=weekdays, **common)
        # Two threads may both build it; either result is the same immutable trigger.
        self._built = trigger
        return trigger


class _TimesOfDay:
    """The times of day of a cron job that fires on every day."""

    def __init__(self, second: frozenset[int], minute: frozenset[int], hour: frozenset[int]):
        self._seconds = sorted(second)
        self._minutes = sorted(minute)
        self._hours = sorted(hour)

    def next_at_or_after(self, wall: int) -> int:
        day, time_of_day = divmod(wall, _DAY)
        hour, rest = divmod(time_of_day, 3600)
        minute, second = divmod(rest, 60)
        found = self._in_day(hour, minute, second)
        if found is None:
            day += 1
            found = self._hours[0] * 3600 + self._minutes[0] * 60 + self._seconds[0]
        return day * _DAY + found

    def _in_day(self, hour: int, minute: int, second: int) -> int | None:
        """Seconds into the day of the first match at or after hour:minute:second, if any."""
        hours, minutes, seconds = self._hours, self._minutes, self._seconds
        at = bisect_left(hours, hour)
        if at == len(hours):
            return None
        if hours[at] > hour:
            return hours[at] * 3600 + minutes[0] * 60 + seconds[0]
        at_minute = bisect_left(minutes, minute)
        if at_minute < len(minutes):
            if minutes[at_minute] > minute:
                return hour * 3600 + minutes[at_minute] * 60 + seconds[0]
            at_second = bisect_left(seconds, second)
            if at_second < len(seconds):
                return hour * 3600 + minute * 60 + seconds[at_second]
            if at_minute + 1 < len(minutes):
                return hour * 3600 + minutes[at_minute + 1] * 60 + seconds[0]
        if at + 1 < len(hours):
            return hours[at + 1] * 3600 + minutes[0] * 60 + seconds[0]
        return None


def _numbers(values: frozenset[int], low: int, high: int) -> str:
    # The shortest spelling: APScheduler evaluates every list item on every call.
    ordered = sorted(values)
    if len(ordered) == high - low + 1:
        return "*"
    if len(ordered) == 1:
        return str(ordered[0])
    step = ordered[1] - ordered[0]
    if all(b - a == step for a, b in pairwise(ordered)):
        return f"{ordered[0]}-{ordered[-1]}" + (f"/{step}" if step > 1 else "")
    return ",".join(_runs(ordered, [str(v) for v in ordered]))


def _runs(ordered: list[int], names: list[str]) -> list[str]:
    """Consecutive values as ``first-last``, others alone, spelled with ``names``."""
    parts: list[str] = []
    start = 0
    for index in range(1, len(ordered) + 1):
        if index == len(ordered) or ordered[index] != ordered[index - 1] + 1:
            first, last = names[start], names[index - 1]
            parts.append(first if start == index - 1 else f"{first}-{last}")
            start = index
    return parts
