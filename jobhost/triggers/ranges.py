"""A past range of a schedule (a backfill's ``from ≤ occurrence < to``): its bounds as an
operator writes them, and its occurrences, from the schedule the firing loop fires by (so a
range crosses a daylight-saving change exactly as the schedule did)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from jobhost.triggers._daylight import load_zone
from jobhost.triggers.instants import SAFE_RANGE_TEXT, safe_utc
from jobhost.triggers.search import count_between

if TYPE_CHECKING:
    from jobhost.triggers import Schedule

__all__ = ["BoundError", "OccurrenceRange", "occurrences_in", "parse_bound"]

_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_EXAMPLES = "2026-11-28, 2026-11-28T00:00:00Z or 2026-11-28T00:00+01:00"


class BoundError(ValueError):
    """A range bound that is not a date or an ISO 8601 instant with a zone."""


@dataclass(frozen=True, slots=True)
class OccurrenceRange:
    """The occurrences of a range, oldest first; past the limit none, ``over_limit`` and the
    ``count`` (``count_text`` says "about N" when it was estimated)."""

    occurrences: tuple[datetime, ...]
    over_limit: bool
    count: int
    count_text: str


def parse_bound(text: str, timezone: str) -> datetime:
    """``text`` as an aware UTC instant (a date alone is midnight in ``timezone``), or
    :class:`BoundError`."""
    value = text.strip()
    if _DATE_ONLY.fullmatch(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise BoundError(f"{text!r} is not a calendar date (e.g. {_EXAMPLES})") from None
        # Where a zone skips midnight, the earlier offset places it at the gap's start.
        return _safe(text, datetime.combine(day, time(0), tzinfo=load_zone(timezone)))
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise BoundError(f"{text!r} is not a date or an ISO 8601 time (e.g. {_EXAMPLES})") from None
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise BoundError(
            f"{text!r} has no zone: add one, e.g. Z or +01:00 (or give a date alone, which "
            f"means midnight in the job's zone {timezone})"
        )
    return _safe(text, instant)


def _safe(text: str, instant: datetime) -> datetime:
    utc = safe_utc(instant)
    if utc is None:
        raise BoundError(f"{text[:40]!r} is out of range: give a time {SAFE_RANGE_TEXT}")
    return utc


def occurrences_in(
    schedule: Schedule, start: datetime, end: datetime, *, limit: int
) -> OccurrenceRange:
    """Occurrences with ``start ≤ occurrence < end``: at most ``limit`` listed, counted past it."""
    if end <= start:
        return OccurrenceRange((), False, 0, "0")
    just_before = start - timedelta(microseconds=1)
    found: list[datetime] = []
    current = schedule.next_after(just_before)
    while current is not None and current < end:
        if len(found) == limit:
            counted = count_between(schedule, just_before, end)
            return OccurrenceRange((), True, counted.count, counted.text())
        found.append(current)
        current = schedule.next_after(current)
    return OccurrenceRange(tuple(found), False, len(found), f"{len(found):,}")
