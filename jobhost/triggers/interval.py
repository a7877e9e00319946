"""A fixed period counted from an anchor: occurrences at ``anchor + k * every`` for k >= 0."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobhost_contracts.durations import format_duration

__all__ = ["IntervalSchedule"]


@dataclass(frozen=True)
class IntervalSchedule:
    """Every ``every`` (positive) from ``anchor`` (aware, kept in UTC) on."""

    every: timedelta
    anchor: datetime

    def __post_init__(self) -> None:
        if self.every <= timedelta(0):
            raise ValueError(
                f"an interval must be positive, got {format_duration(self.every)}; "
                "write e.g. '90s', '15m' or '6h'"
            )
        _require_aware(self.anchor, "anchor")
        object.__setattr__(self, "anchor", self.anchor.astimezone(UTC))

    def next_after(self, after: datetime) -> datetime:
        _require_aware(after, "after")
        if after < self.anchor:
            return self.anchor
        # Floor division counts the occurrences at or before `after`, so one more is past it.
        return self.anchor + ((after - self.anchor) // self.every + 1) * self.every

    def iter_after(self, after: datetime, limit: int) -> list[datetime]:
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        if limit == 0:
            return []
        try:
            first = self.next_after(after)
        except OverflowError:  # past the last instant a datetime holds: none, as for a cron
            return []
        room = (datetime.max.replace(tzinfo=UTC) - first) // self.every + 1
        return [first + index * self.every for index in range(min(limit, room))]

    def skipped_between(self, after: datetime, until: datetime) -> list[datetime]:
        return []  # an interval counts real time, which daylight saving never skips

    def describe(self) -> str:
        return f"every {format_duration(self.every)}"


def _require_aware(moment: datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got naive {moment.isoformat()}")
