"""A backfill's range: bounds as written, and the occurrences with from ≤ occurrence < to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from jobhost_contracts import DstGap, DstRepeat

from jobhost.rules import select_occurrences
from jobhost.triggers import IntervalSchedule, cron_schedule
from jobhost.triggers.ranges import BoundError, occurrences_in, parse_bound


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def test_a_date_alone_is_midnight_in_the_zone() -> None:
    assert parse_bound("2026-11-28", "Europe/Berlin") == utc(2026, 11, 27, 23)
    assert parse_bound("2026-07-01", "Europe/Berlin") == utc(2026, 6, 30, 22)
    assert parse_bound("2026-11-28", "UTC") == utc(2026, 11, 28)


def test_an_instant_keeps_its_own_zone() -> None:
    assert parse_bound("2026-11-28T00:00:00Z", "Europe/Berlin") == utc(2026, 11, 28)
    assert parse_bound("2026-11-28T00:00+01:00", "UTC") == utc(2026, 11, 27, 23)


@pytest.mark.parametrize("text", ["2026-11-28T00:00", "yesterday", "2026-02-30", ""])
def test_a_bound_without_a_zone_or_unreadable_is_refused(text: str) -> None:
    with pytest.raises(BoundError, match=r"e\.g\. .*Z"):
        parse_bound(text, "Europe/Berlin")


def test_the_range_includes_from_and_excludes_to() -> None:
    nightly = cron_schedule("0 3 * * *", "UTC")
    found = occurrences_in(nightly, utc(2026, 11, 28, 3), utc(2026, 11, 30, 3), limit=100)
    assert found.occurrences == (utc(2026, 11, 28, 3), utc(2026, 11, 29, 3))
    assert not found.over_limit
    assert occurrences_in(nightly, utc(2026, 11, 30), utc(2026, 11, 29), limit=9).count == 0


def test_a_weekend_by_dates_in_berlin() -> None:
    nightly = cron_schedule("0 2 * * *", "Europe/Berlin")
    start = parse_bound("2026-11-28", "Europe/Berlin")
    end = parse_bound("2026-11-30", "Europe/Berlin")
    found = occurrences_in(nightly, start, end, limit=100)
    assert found.occurrences == (utc(2026, 11, 28, 1), utc(2026, 11, 29, 1))


def test_an_interval_keeps_its_anchor_phase() -> None:
    every = IntervalSchedule(timedelta(hours=6), utc(2026, 1, 1, 1, 30))
    found = occurrences_in(every, utc(2026, 11, 28), utc(2026, 11, 29), limit=100)
    assert found.occurrences == tuple(utc(2026, 11, 28, h, 30) for h in (1, 7, 13, 19))


@pytest.mark.parametrize(
    ("gap", "expected"),
    [
        # 02:30 does not exist on 29 March 2026 in Berlin: shifted to 03:00 CEST, or skipped.
        (DstGap.SHIFT, [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
        (DstGap.SKIP, [utc(2026, 3, 28, 1, 30), utc(2026, 3, 30, 0, 30)]),
    ],
)
def test_a_spring_forward_gap_in_berlin(gap: DstGap, expected: list[datetime]) -> None:
    nightly = cron_schedule("30 2 * * *", "Europe/Berlin", dst_gap=gap)
    start, end = (parse_bound(d, "Europe/Berlin") for d in ("2026-03-28", "2026-03-31"))
    assert list(occurrences_in(nightly, start, end, limit=100).occurrences) == expected


@pytest.mark.parametrize(
    ("repeat", "on_the_day"),
    [
        # 02:30 happens twice on 25 October 2026 in Berlin: 00:30Z (CEST) and 01:30Z (CET).
        (DstRepeat.ONCE, utc(2026, 10, 25, 0, 30)),
        (DstRepeat.FIRST, utc(2026, 10, 25, 0, 30)),
        (DstRepeat.SECOND, utc(2026, 10, 25, 1, 30)),
    ],
)
def test_an_autumn_repeat_in_berlin(repeat: DstRepeat, on_the_day: datetime) -> None:
    nightly = cron_schedule("30 2 * * *", "Europe/Berlin", dst_repeat=repeat)
    start, end = (parse_bound(d, "Europe/Berlin") for d in ("2026-10-24", "2026-10-27"))
    found = occurrences_in(nightly, start, end, limit=100).occurrences
    assert found == (utc(2026, 10, 24, 0, 30), on_the_day, utc(2026, 10, 26, 1, 30))


def test_an_hourly_job_fires_in_both_passes_of_the_repeated_hour() -> None:
    hourly = cron_schedule("0 * * * *", "Europe/Berlin")
    start, end = parse_bound("2026-10-25", "Europe/Berlin"), utc(2026, 10, 25, 3)
    found = occurrences_in(hourly, start, end, limit=100).occurrences
    # Local 00:00, 01:00, 02:00 CEST, 02:00 CET: four hours of real time, four runs.
    assert found == tuple(utc(2026, 10, 24, 22) + timedelta(hours=h) for h in range(5))


def test_more_than_the_limit_is_counted_not_listed() -> None:
    minutely = cron_schedule("* * * * *", "UTC")
    found = occurrences_in(minutely, utc(2026, 11, 1), utc(2026, 11, 2), limit=1000)
    assert (found.over_limit, found.occurrences, found.count) == (True, (), 1440)
    assert found.count_text == "1,440"
    exact = occurrences_in(minutely, utc(2026, 11, 1), utc(2026, 11, 1, 1), limit=60)
    assert (exact.over_limit, len(exact.occurrences)) == (False, 60)


def test_each_mode_selects_by_the_last_attempt() -> None:
    days = [utc(2026, 11, d, 3) for d in range(20, 29)]
    ledger = {
        days[0]: "succeeded",
        days[1]: "failed",
        days[2]: "timed_out",
        days[3]: "abandoned",
        days[4]: "cancelled",
        days[5]: "missed",
        days[6]: "skipped",
        days[7]: "running",
        # days[8]: never ran
    }
    assert select_occurrences("missing", days, ledger) == [*days[1:7], days[8]]
    assert select_occurrences("failed", days, ledger) == days[1:4]
    assert select_occurrences("all", days, ledger) == days
    with pytest.raises(ValueError, match="missing, failed, all"):
        select_occurrences("some", days, ledger)
