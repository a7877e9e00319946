"""Interval schedules: a positive period, counted from an anchor whose phase is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobhost.triggers import IntervalSchedule

ANCHOR = datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)
EVERY_15M = IntervalSchedule(timedelta(minutes=15), ANCHOR)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (datetime(2026, 1, 1, 12, 7, tzinfo=UTC), datetime(2026, 1, 1, 12, 15, 30, tzinfo=UTC)),
        # an occurrence is not after itself
        (
            datetime(2026, 1, 1, 12, 15, 30, tzinfo=UTC),
            datetime(2026, 1, 1, 12, 30, 30, tzinfo=UTC),
        ),
        (
            datetime(2026, 1, 1, 12, 15, 29, 999_999, tzinfo=UTC),
            datetime(2026, 1, 1, 12, 15, 30, tzinfo=UTC),
        ),
        # before the anchor: the anchor is the first occurrence
        (datetime(2025, 12, 1, tzinfo=UTC), ANCHOR),
        (ANCHOR - timedelta(microseconds=1), ANCHOR),
        (ANCHOR, ANCHOR + timedelta(minutes=15)),
        # a year later the phase is still the anchor's
        (datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, 0, 0, 30, tzinfo=UTC)),
        # any aware datetime
        (
            datetime(2026, 1, 1, 14, 7, tzinfo=timezone(timedelta(hours=2))),
            datetime(2026, 1, 1, 12, 15, 30, tzinfo=UTC),
        ),
    ],
)
def test_next_after(after: datetime, expected: datetime) -> None:
    assert EVERY_15M.next_after(after) == expected


def test_iter_after_keeps_the_phase() -> None:
    assert EVERY_15M.iter_after(datetime(2026, 1, 1, 10, 20, tzinfo=UTC), 3) == [
        datetime(2026, 1, 1, 10, 30, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 10, 45, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 11, 0, 30, tzinfo=UTC),
    ]
    assert EVERY_15M.iter_after(ANCHOR, 0) == []
    with pytest.raises(ValueError, match="limit"):
        EVERY_15M.iter_after(ANCHOR, -1)


def test_sub_second_phase_is_kept() -> None:
    schedule = IntervalSchedule(timedelta(milliseconds=1500), ANCHOR.replace(microsecond=250_000))
    assert schedule.next_after(ANCHOR + timedelta(seconds=2)) == ANCHOR.replace(
        second=33, microsecond=250_000
    )


def test_the_anchor_is_kept_in_utc() -> None:
    berlin_noon = datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    schedule = IntervalSchedule(timedelta(hours=6), berlin_noon)
    assert schedule.anchor == datetime(2026, 6, 1, 10, tzinfo=UTC)
    assert schedule.anchor.tzinfo is UTC
    assert schedule.next_after(berlin_noon).tzinfo is UTC


@pytest.mark.parametrize("every", [timedelta(0), timedelta(seconds=-1), -timedelta(hours=6)])
def test_the_period_must_be_positive(every: timedelta) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        IntervalSchedule(every, ANCHOR)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="anchor must be an aware datetime"):
        IntervalSchedule(timedelta(hours=1), datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="after must be an aware datetime"):
        EVERY_15M.next_after(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("every", "text"),
    [
        (timedelta(hours=6), "every 6h"),
        (timedelta(minutes=90), "every 1h30m"),
        (timedelta(seconds=45), "every 45s"),
        (timedelta(days=7), "every 7d"),
    ],
)
def test_describe(every: timedelta, text: str) -> None:
    assert IntervalSchedule(every, ANCHOR).describe() == text


def test_iter_after_stops_at_the_last_instant_a_datetime_holds() -> None:
    yearly = IntervalSchedule(timedelta(days=365), datetime(2026, 1, 1, tzinfo=UTC))
    late = datetime(9990, 1, 1, tzinfo=UTC)
    instants = yearly.iter_after(late, 100)
    assert 0 < len(instants) < 100 and instants == sorted(instants)
    assert datetime.max.replace(tzinfo=UTC) - instants[-1] < timedelta(days=365)
    assert yearly.iter_after(datetime.max.replace(tzinfo=UTC) - timedelta(days=1), 3) == []
