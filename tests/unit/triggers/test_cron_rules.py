"""What a cron expression matches, in UTC: fields, names, day rules, seconds, strictly-after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from jobhost.triggers import cron_schedule

# 2026-01-01 is a Thursday.
NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)


def at(year: int, month: int, day: int, *time: int) -> datetime:
    """A UTC datetime; ``time`` is hour, minute, second, microsecond, as far as needed."""
    hour, minute, second, micro = (*time, 0, 0, 0, 0)[:4]
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def days(*dates: tuple[int, int]) -> list[datetime]:
    """Midnights in 2026, from (month, day) pairs."""
    return [at(2026, month, day) for month, day in dates]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 3 * * 1", [at(2026, 1, 5, 3), at(2026, 1, 12, 3)]),  # Monday is 1
        # Sunday is 0, 7 and sun, in any case
        ("0 0 * * 0", days((1, 4), (1, 11))),
        ("0 0 * * 7", days((1, 4), (1, 11))),
        ("0 0 * * sun", days((1, 4), (1, 11))),
        ("0 0 * * SUN", days((1, 4), (1, 11))),
        ("0 0 * * 5-7", days((1, 2), (1, 3), (1, 4), (1, 9))),
        ("0 0 * * 0-1", days((1, 4), (1, 5), (1, 11), (1, 12))),
        ("0 0 * * 6,7", days((1, 3), (1, 4), (1, 10))),
        ("0 0 * * Mon-Fri", days((1, 2), (1, 5), (1, 6), (1, 7), (1, 8), (1, 9))),
        ("0 0 * * 1/2", days((1, 2), (1, 4), (1, 5), (1, 7))),  # Mon Wed Fri Sun (7)
        ("0 0 * * */2", days((1, 3), (1, 4), (1, 6), (1, 8))),  # Sun Tue Thu Sat
        # Both day fields restricted: either one matches (Friday the 13th is not required).
        ("0 0 13 * 5", days((1, 2), (1, 9), (1, 13), (1, 16), (1, 23), (1, 30), (2, 6))),
        ("0 0 13 * fri", days((1, 2), (1, 9), (1, 13), (1, 16))),
        ("0 0 1-31 * 1", days((1, 2), (1, 3), (1, 4))),  # OR with every day is every day
        ("0 0 13 * 0-6", days((1, 2), (1, 3), (1, 4))),
        # One day field starting with '*' (or '?'): it filters, both must match.
        ("0 0 */2 * 1", days((1, 5), (1, 19), (2, 9), (2, 23))),  # odd days that are Mondays
        ("0 0 */10 * 5", days((5, 1), (7, 31), (8, 21), (9, 11), (12, 11))),
        ("0 0 13 * */1", days((1, 13), (2, 13), (3, 13))),
        ("0 0 13 * *", days((1, 13), (2, 13))),
        ("0 0 ? * 1", days((1, 5), (1, 12))),
        ("0 0 13 * ?", days((1, 13), (2, 13))),
        ("0 0 ? * ?", days((1, 2), (1, 3))),
        # The day-of-month side of an OR cannot fire, the weekdays still do.
        ("0 0 30 2 1", days((2, 2), (2, 9), (2, 16), (2, 23))),
        # minutes and hours: steps, ranges, lists
        ("*/15 * * * *", [at(2026, 1, 1, 0, 15), at(2026, 1, 1, 0, 30), at(2026, 1, 1, 0, 45)]),
        ("5/15 * * * *", [at(2026, 1, 1, 0, 5), at(2026, 1, 1, 0, 20), at(2026, 1, 1, 0, 35)]),
        (
            "10-40/10 9 * * *",
            [at(2026, 1, 1, 9, m) for m in (10, 20, 30, 40)] + [at(2026, 1, 2, 9, 10)],
        ),
        ("0,30 9-10 * * *", [at(2026, 1, 1, h, m) for h in (9, 10) for m in (0, 30)]),
        ("0 */6 * * *", [at(2026, 1, 1, h) for h in (6, 12, 18)] + [at(2026, 1, 2)]),
        ("0 22/3 * * *", [at(2026, 1, 1, 22), at(2026, 1, 2, 22)]),
        ("0 1-3,20 * * *", [at(2026, 1, 1, h) for h in (1, 2, 3, 20)]),
        ("07 08 * * *", [at(2026, 1, 1, 8, 7), at(2026, 1, 2, 8, 7)]),
        # days and months
        ("0 0 1,15 * *", days((1, 15), (2, 1), (2, 15))),
        ("0 0 1 jan,Jul *", [at(2026, 7, 1), at(2027, 1, 1)]),
        ("0 0 1 JAN-MAR *", days((2, 1), (3, 1))),
        ("0 0 1 */3 *", days((4, 1), (7, 1), (10, 1))),
        ("0 0 31 * *", days((1, 31), (3, 31), (5, 31))),
        ("0 0 29 2 *", [at(2028, 2, 29), at(2032, 2, 29)]),
        ("59 23 31 12 *", [at(2026, 12, 31, 23, 59), at(2027, 12, 31, 23, 59)]),
        # six fields: seconds first
        (
            "*/20 * * * * *",
            [at(2026, 1, 1, 0, 0, 20), at(2026, 1, 1, 0, 0, 40), at(2026, 1, 1, 0, 1)],
        ),
        ("30 0 3 * * *", [at(2026, 1, 1, 3, 0, 30), at(2026, 1, 2, 3, 0, 30)]),
        ("0 0 0 13 * 5", days((1, 2), (1, 9), (1, 13))),
    ],
)
def test_occurrences(expression: str, expected: list[datetime]) -> None:
    assert cron_schedule(expression).iter_after(NEW_YEAR, len(expected)) == expected


def test_five_fields_fire_on_the_minute_and_six_on_the_second() -> None:
    assert cron_schedule("* * * * *").next_after(at(2026, 1, 1, 0, 0, 1)) == at(2026, 1, 1, 0, 1)
    assert cron_schedule("* * * * * *").next_after(at(2026, 1, 1, 0, 0, 1)) == at(
        2026, 1, 1, 0, 0, 2
    )


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (at(2026, 1, 1, 3), at(2026, 1, 2, 3)),  # an occurrence itself is not after itself
        (at(2026, 1, 1, 2, 59, 59, 999_999), at(2026, 1, 1, 3)),
        (at(2026, 1, 1, 3, 0, 0, 1), at(2026, 1, 2, 3)),
        (datetime(2026, 1, 1, 5, tzinfo=timezone(timedelta(hours=3))), at(2026, 1, 1, 3)),
        (
            datetime(2026, 1, 1, 4, 30, tzinfo=timezone(timedelta(hours=1, minutes=30))),
            at(2026, 1, 2, 3),
        ),
    ],
)
def test_next_after_is_strictly_after(after: datetime, expected: datetime) -> None:
    assert cron_schedule("0 3 * * *").next_after(after) == expected


def test_second_resolution_strictly_after_with_microseconds() -> None:
    every_second = cron_schedule("* * * * * *")
    assert every_second.next_after(at(2026, 1, 1, 0, 0, 0, 999_999)) == at(2026, 1, 1, 0, 0, 1)
    assert every_second.next_after(at(2026, 1, 1, 0, 0, 1)) == at(2026, 1, 1, 0, 0, 2)


def test_results_are_utc_on_whole_seconds() -> None:
    found = cron_schedule("*/7 * * * * *", "Asia/Kolkata").iter_after(
        datetime(2026, 1, 1, 0, 0, 3, 123_456, tzinfo=timezone(timedelta(hours=-7))), 20
    )
    assert all(instant.tzinfo is UTC and instant.microsecond == 0 for instant in found)
    assert all(a < b for a, b in pairwise(found))


def test_a_zone_without_daylight_saving_shifts_by_its_offset() -> None:
    kolkata = cron_schedule("0 3 * * *", "Asia/Kolkata")
    assert kolkata.next_after(NEW_YEAR) == at(2026, 1, 1, 21, 30)


def test_naive_datetimes_are_refused() -> None:
    schedule = cron_schedule("0 3 * * *")
    with pytest.raises(ValueError, match="aware"):
        schedule.next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        schedule.iter_after(datetime(2026, 1, 1), 3)


def test_iter_after_limits() -> None:
    schedule = cron_schedule("0 3 * * *")
    assert schedule.iter_after(NEW_YEAR, 0) == []
    with pytest.raises(ValueError, match="limit"):
        schedule.iter_after(NEW_YEAR, -1)


def test_iter_after_chains_next_after() -> None:
    schedule = cron_schedule("*/20 8-9 * * mon", "Europe/Berlin")
    found = schedule.iter_after(NEW_YEAR, 10)
    assert found[0] == schedule.next_after(NEW_YEAR)
    assert found[1:] == [schedule.next_after(instant) for instant in found[:-1]]


def test_far_future_dates() -> None:
    # Past the zone database's explicit table the zone's rule string applies.
    assert cron_schedule("30 2 * * *", "Europe/Berlin").next_after(at(2100, 3, 27, 12)) == at(
        2100, 3, 28, 1
    )
    assert cron_schedule("0 0 1 1 *").iter_after(at(9997, 6, 1), 5) == [
        at(9998, 1, 1),
        at(9999, 1, 1),
    ]


def test_a_rare_combination_years_away() -> None:
    # February 29th that is also a Sunday ('*/7' is 0 and 7): the AND rule makes it rare.
    schedule = cron_schedule("0 0 29 2 */7")
    assert schedule.iter_after(NEW_YEAR, 2) == [at(2032, 2, 29), at(2060, 2, 29)]
