"""Trigger math: when a job's occurrences fall, as UTC instants. Pure: no clock, no database.
Cron follows Debian's cron, daylight-saving rules included; intervals keep their anchor's phase."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from jobhost.triggers._daylight import UnknownTimezoneError, load_zone
from jobhost.triggers.cron import CronNeverFiresError, CronSchedule, CronSyntaxError, cron_schedule
from jobhost.triggers.interval import IntervalSchedule

__all__ = [
    "CronNeverFiresError",
    "CronSchedule",
    "CronSyntaxError",
    "IntervalSchedule",
    "Schedule",
    "UnknownTimezoneError",
    "cron_schedule",
    "load_zone",
]


class Schedule(Protocol):
    """What the host asks of a trigger. Instants are aware UTC datetimes."""

    def next_after(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after ``after`` (any aware datetime; naive raises
        ValueError), or None when there is none."""

    def iter_after(self, after: datetime, limit: int) -> list[datetime]:
        """Up to ``limit`` consecutive occurrences strictly after ``after``, increasing."""

    def skipped_between(self, after: datetime, until: datetime) -> list[datetime]:
        """Occurrences in ``(after, until]`` a spring-forward skipped under ``dst_gap = skip``
        (the firing loop records each ``missed``)."""

    def describe(self) -> str:
        """For people: ``cron '30 2 * * *' in Europe/Berlin``, ``every 6h``."""
