"""The newest occurrences due and how many lie in a gap, without walking the whole gap:
intervals by arithmetic, cron by a window that grows backwards from ``now``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jobhost.triggers.interval import IntervalSchedule

if TYPE_CHECKING:
    from jobhost.triggers import Schedule

__all__ = ["COUNT_STEPS", "GapCount", "count_between", "newest_at_or_before"]

_FIRST_WINDOW = timedelta(seconds=2)
_GROWTH = 4
_MAX_WINDOW = timedelta(days=4 * 366)
COUNT_STEPS = 20_000
"""Most occurrences a cron gap is stepped through to count it; beyond, the count is estimated."""


@dataclass(frozen=True, slots=True)
class GapCount:
    """How many occurrences lie in a gap; ``exact`` is False when it was estimated."""

    count: int
    exact: bool = True

    def text(self) -> str:
        return f"{self.count:,}" if self.exact else f"about {self.count:,}"


def newest_at_or_before(
    schedule: Schedule, now: datetime, *, keep: int, not_before: datetime
) -> list[datetime]:
    """Up to ``keep`` of the newest occurrences in ``[not_before, now]``, oldest first."""
    if keep <= 0 or not_before > now:
        return []
    if isinstance(schedule, IntervalSchedule):
        anchor, every = schedule.anchor, schedule.every
        if now < anchor:
            return []
        last = anchor + ((now - anchor) // every) * every
        newest = [last - index * every for index in range(keep)]
        return sorted(o for o in newest if o >= not_before and o >= anchor)
    window = _FIRST_WINDOW
    while True:
        start = max(now - window, not_before)
        # Occurrences strictly after `start - 1µs` are those at or after `start`.
        found = _list_until(schedule, start - timedelta(microseconds=1), now, bound=keep * 8 + 64)
        if len(found) >= keep or start <= not_before or window >= _MAX_WINDOW:
            return found[-keep:]
        window *= _GROWTH


def count_between(schedule: Schedule, after: datetime, before: datetime) -> GapCount:
    """The occurrences strictly after ``after`` and strictly before ``before``."""
    if before <= after:
        return GapCount(0)
    if isinstance(schedule, IntervalSchedule):
        first = schedule.next_after(after)
        if first >= before:
            return GapCount(0)
        return GapCount((before - first - timedelta(microseconds=1)) // schedule.every + 1)
    counted = 0
    current: datetime | None = after
    while counted < COUNT_STEPS:
        current = schedule.next_after(current) if current is not None else None
        if current is None or current >= before:
            return GapCount(counted)
        counted += 1
    assert current is not None
    # Too many to step through: extrapolate the rate seen so far over the rest of the gap.
    covered = (current - after).total_seconds()
    rest = (before - current).total_seconds()
    return GapCount(counted + int(counted * rest / covered) if covered > 0 else counted, False)


def _list_until(schedule: Schedule, after: datetime, until: datetime, bound: int) -> list[datetime]:
    found: list[datetime] = []
    current = schedule.next_after(after)
    while current is not None and current <= until:
        found.append(current)
        if len(found) > bound:
            found = found[-bound:]
        current = schedule.next_after(current)
    return found
