"""Local wall time to instants: IANA zones, Debian cron's daylight-saving rules, and a job's own.

Instants and wall times are whole seconds since 1970 (UTC, or the naive local clock); offsets
are seconds east of UTC. A zone's transitions are sampled once and kept: the rest is arithmetic.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from jobhost_contracts import DstGap, DstRepeat

__all__ = ["Calendar", "UnknownTimezoneError", "load_zone", "next_instant", "skipped_wall_times"]

Calendar = Callable[[int], int | None]
"""The first wall time at or after the given one that the cron fields match (None: never)."""


class UnknownTimezoneError(LookupError):
    """A time zone name that is not an IANA zone this machine knows."""

    def __init__(self, timezone: str) -> None:
        self.timezone = timezone
        hint = _case_hint(timezone)
        super().__init__(
            f"unknown time zone {timezone!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
            + (f" (did you mean {hint!r}?)" if hint else "")
        )

    def __reduce__(self) -> tuple[type[UnknownTimezoneError], tuple[str]]:
        return (type(self), (self.timezone,))


def load_zone(name: str) -> ZoneInfo:
    """The IANA zone called ``name``; raises :class:`UnknownTimezoneError` for anything else."""
    try:
        return ZoneInfo(name)
    # Not found, a refused key ("", "../etc"), a directory ("Europe"), a file that is no zone.
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimezoneError(name) from None


def next_instant(
    zone: ZoneInfo,
    calendar: Calendar,
    *,
    fixed_time: bool,
    after: int,
    gap: DstGap = DstGap.SHIFT,
    repeat: DstRepeat = DstRepeat.ONCE,
) -> int | None:
    """The first instant strictly after ``after`` at which a cron job in ``zone`` fires.

    By default (Debian cron) a fixed-time job fires a skipped wall time once just after the gap,
    and a repeated one on its first pass only (``gap`` and ``repeat`` choose otherwise); a
    wildcard job fires the wall times that really happen.
    """
    timeline = _timeline(zone)
    # Outside datetime's years the zone cannot be asked; no cron job fires there anyway.
    lowest = max(after + 1, _FIRST_INSTANT)
    if lowest > _LAST_INSTANT:
        return None
    shift_gap = fixed_time and gap is DstGap.SHIFT
    first_pass_only = fixed_time and repeat in {DstRepeat.ONCE, DstRepeat.FIRST}
    second_pass_only = fixed_time and repeat is DstRepeat.SECOND
    previous = timeline.last_transition(lowest - _LOOKBACK, lowest)
    if previous is None:
        segment_start: int | None = None
        offset = before = timeline.offset_at(lowest)
    else:
        segment_start, before, offset = previous
    # Walk the segments of constant offset from `lowest` on; usually the first one answers.
    while True:
        floor = start = lowest if segment_start is None else max(lowest, segment_start)
        if segment_start is not None:
            if shift_gap and offset > before and segment_start >= lowest:
                gap_match = calendar(segment_start + before)
                if gap_match is None:
                    return None
                if gap_match < segment_start + offset:
                    return segment_start
            elif first_pass_only and offset < before:
                # The wall times repeated here had their first pass before the transition.
                start = max(start, segment_start + before - offset)
        wall = calendar(start + offset)
        if wall is None:
            return None
        candidate = wall - offset
        following = timeline.first_transition(floor, candidate)
        if following is None:
            if second_pass_only:
                ahead = timeline.first_transition(candidate, candidate + _LOOKBACK)
                shift = 0 if ahead is None else ahead.before - ahead.after
                # On the first pass of the wall times a fall-back repeats: fire it on the second.
                if ahead is not None and shift > 0 and ahead.at - shift <= candidate < ahead.at:
                    segment_start, before, offset = ahead
                    continue
            return candidate
        segment_start, before, offset = following


def skipped_wall_times(zone: ZoneInfo, calendar: Calendar, *, after: int, until: int) -> list[int]:
    """The wall times ``calendar`` matches that a spring-forward skips, in ``(after, until]``,
    each at the instant ``fold=0`` gives it (the offset before the gap)."""
    timeline = _timeline(zone)
    low, high = max(after, _FIRST_INSTANT), min(until, _LAST_INSTANT)
    found: list[int] = []
    # A gap's instants follow its transition by less than _LOOKBACK.
    cursor = low - _LOOKBACK
    while cursor < high:
        transition = timeline.first_transition(cursor, high)
        if transition is None:
            break
        cursor = transition.at
        if transition.after <= transition.before:
            continue
        wall = calendar(transition.at + transition.before)
        while wall is not None and wall < transition.at + transition.after:
            instant = wall - transition.before
            if low < instant <= high:
                found.append(instant)
            wall = calendar(wall + 1)
    return found


class _Transition(NamedTuple):
    at: int
    """The first instant with the new offset."""
    before: int
    after: int


# A second pass lasts as long as its backward shift, at most 7 hours since 1970
# (Antarctica/Vostok, 1994): the transition that began the pass an instant is in lies within this.
_LOOKBACK = 2 * 86400
# Transitions are sampled every 6 hours and kept in buckets of 1461 samples (a Julian year).
# Since 1970 no zone has two transitions less than a week apart, so none hides between samples.
_SAMPLE = 6 * 3600
_BUCKET = 1461 * _SAMPLE
# datetime covers the years 1 to 9999; keep a margin for the largest offsets.
_FIRST_INSTANT = -62135596800 + _LOOKBACK
_LAST_INSTANT = 253402300799 - _LOOKBACK


class _Timeline:
    """One zone's transitions, computed on first use and kept; bucket ``k`` holds those in
    ``(k * _BUCKET, (k + 1) * _BUCKET]``."""

    def __init__(self, zone: ZoneInfo) -> None:
        self._zone = zone
        self._buckets: dict[int, tuple[list[int], list[_Transition]]] = {}

    def offset_at(self, instant: int) -> int:
        offset = datetime.fromtimestamp(instant, self._zone).utcoffset()
        if offset is None:  # pragma: no cover - a ZoneInfo always has an offset
            raise ValueError(f"time zone {self._zone.key!r} gives no offset")
        return offset.days * 86400 + offset.seconds

    def first_transition(self, low: int, high: int) -> _Transition | None:
        """The first transition in ``(low, high]``."""
        for index in range(low // _BUCKET, (high - 1) // _BUCKET + 1):
            starts, transitions = self._bucket(index)
            position = bisect.bisect_right(starts, low)
            if position < len(starts):
                found = transitions[position]
                return found if found.at <= high else None
        return None

    def last_transition(self, low: int, high: int) -> _Transition | None:
        """The last transition in ``(low, high]``."""
        for index in range((high - 1) // _BUCKET, low // _BUCKET - 1, -1):
            starts, transitions = self._bucket(index)
            position = bisect.bisect_right(starts, high)
            if position > 0:
                found = transitions[position - 1]
                return found if found.at > low else None
        return None

    def _bucket(self, index: int) -> tuple[list[int], list[_Transition]]:
        cached = self._buckets.get(index)
        if cached is None:
            transitions = self._scan(index * _BUCKET, (index + 1) * _BUCKET)
            cached = ([t.at for t in transitions], transitions)
            self._buckets[index] = cached
        return cached

    def _scan(self, low: int, high: int) -> list[_Transition]:
        if low < _FIRST_INSTANT or high > _LAST_INSTANT:
            return []
        found: list[_Transition] = []
        offset = self.offset_at(low)
        for sample in range(low, high, _SAMPLE):
            following = sample + _SAMPLE
            next_offset = self.offset_at(following)
            if next_offset != offset:
                found.append(self._pinpoint(sample, offset, following, next_offset))
            offset = next_offset
        return found

    def _pinpoint(self, low: int, before: int, high: int, after: int) -> _Transition:
        # Invariant: the offset at `low` is `before` and at `high` is not.
        while high - low > 1:
            middle = (low + high) // 2
            if self.offset_at(middle) == before:
                low = middle
            else:
                high = middle
        return _Transition(high, before, after)


_TIMELINES: dict[ZoneInfo, _Timeline] = {}


def _timeline(zone: ZoneInfo) -> _Timeline:
    found = _TIMELINES.get(zone)
    return found if found is not None else _TIMELINES.setdefault(zone, _Timeline(zone))


def _case_hint(name: str) -> str | None:
    # Only on the error path: listing the zones reads the whole zone database.
    if not name or len(name) > 64:
        return None
    wanted = name.strip().lower()
    matches = [key for key in available_timezones() if key.lower() == wanted]
    return matches[0] if len(matches) == 1 and matches[0] != name else None
