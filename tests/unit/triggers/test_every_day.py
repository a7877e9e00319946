"""A cron job that runs every day finds its next time of day without a calendar: it must agree
with APScheduler's calendar, second for second, whatever the fields and the starting point."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.cron import CronTrigger
from hypothesis import given, settings
from hypothesis import strategies as st

from jobhost.triggers import cron_schedule
from jobhost.triggers._apscheduler import CronFields, WallCalendar

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EVERY_DAY = {
    "day_of_month": frozenset(range(1, 32)),
    "month": frozenset(range(1, 13)),
    "day_of_week": frozenset(range(7)),
    "either_day": False,
}


def _values(low: int, high: int) -> st.SearchStrategy[frozenset[int]]:
    return st.frozensets(st.integers(low, high), min_size=1, max_size=6) | st.just(
        frozenset(range(low, high + 1))
    )


def _reference(
    second: frozenset[int], minute: frozenset[int], hour: frozenset[int], wall: int
) -> int:
    trigger = CronTrigger(
        second=",".join(map(str, sorted(second))),
        minute=",".join(map(str, sorted(minute))),
        hour=",".join(map(str, sorted(hour))),
        timezone=UTC,
    )
    fire = trigger.get_next_fire_time(None, _EPOCH + timedelta(seconds=wall))
    return int((fire - _EPOCH).total_seconds())


@settings(max_examples=400, deadline=None)
@given(
    second=_values(0, 59),
    minute=_values(0, 59),
    hour=_values(0, 23),
    wall=st.integers(946_684_800, 2_051_222_400),
    near=st.sampled_from([None, "day end", "hour end", "minute end"]),
)
def test_every_day_times_agree_with_apscheduler(
    second: frozenset[int],
    minute: frozenset[int],
    hour: frozenset[int],
    wall: int,
    near: str | None,
) -> None:
    # Starts just before a day, an hour or a minute turns over are where a search carries.
    if near == "day end":
        wall = wall - wall % 86_400 + 86_399
    elif near == "hour end":
        wall = wall - wall % 3600 + 3599
    elif near == "minute end":
        wall = wall - wall % 60 + 59
    calendar = WallCalendar(CronFields(second=second, minute=minute, hour=hour, **_EVERY_DAY))
    assert calendar.next_at_or_after(wall) == _reference(second, minute, hour, wall)


def test_a_restricted_day_still_follows_the_calendar() -> None:
    # Mondays only: the answer skips to the next Monday, which no time-of-day lookup knows.
    schedule = cron_schedule("0 30 9 * * mon")
    friday = datetime(2026, 12, 4, 12, tzinfo=UTC)
    assert schedule.next_after(friday) == datetime(2026, 12, 7, 9, 30, tzinfo=UTC)


def test_an_hourly_job_in_a_zone_keeps_its_daylight_saving_rules() -> None:
    # A wildcard job follows real time: on the spring-forward night 02:xx does not exist.
    schedule = cron_schedule("15 * * * *", "Europe/Berlin")
    before_gap = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 01:30 CET
    assert schedule.iter_after(before_gap, 2) == [
        datetime(2026, 3, 29, 1, 15, tzinfo=UTC),  # 03:15 CEST
        datetime(2026, 3, 29, 2, 15, tzinfo=UTC),
    ]


def test_every_day_jobs_need_no_calendar_library() -> None:
    # Their first occurrences are what a large catalog computes at start-up.
    probe = (
        "import sys; from datetime import UTC, datetime; "
        "from jobhost.triggers import cron_schedule; "
        "at = datetime(2026, 12, 2, tzinfo=UTC); "
        "[cron_schedule(e, z).next_after(at) for e, z in "
        "[('0 * * * *', 'UTC'), ('*/5 3 * * *', 'Europe/Berlin'), ('7 30 2 * * *', 'UTC')]]; "
        "print(sorted(m for m in sys.modules if m.startswith('apscheduler')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
