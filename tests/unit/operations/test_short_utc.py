"""``short_utc`` writes an instant as the tables and the report's reasons show it, whatever the
instant's zone, exactly as ``strftime("%Y-%m-%d %H:%M:%SZ")`` of it in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobhost.operations.timefmt import short_utc
from jobhost.triggers import load_zone

_ZONES = [
    UTC,
    load_zone("Europe/Berlin"),
    load_zone("Asia/Kolkata"),
    timezone(-timedelta(hours=3, minutes=30)),
]


@pytest.mark.parametrize(
    "instant",
    [
        datetime(2026, 5, 4, 10, 0, tzinfo=UTC),
        datetime(2026, 5, 4, 10, 0, 59, 999999, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, 0, 1, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
        datetime(1000, 1, 1, 0, 0, 5, tzinfo=UTC),
        datetime(999, 12, 31, 23, 0, tzinfo=UTC),
        datetime(9999, 12, 31, 22, 0, tzinfo=UTC),
    ],
)
def test_an_instant_in_any_zone_reads_as_strftime_writes_it_in_utc(instant: datetime) -> None:
    for zone in _ZONES:
        if instant.year in (999, 9999) and zone is not UTC:
            continue  # no room to move it out of UTC
        shown = instant.astimezone(zone)
        assert short_utc(shown) == instant.strftime("%Y-%m-%d %H:%M:%SZ")
    assert short_utc(datetime(2026, 5, 4, 12, 0, tzinfo=load_zone("Europe/Berlin"))) == (
        "2026-05-04 10:00:00Z"
    )


def test_nothing_reads_as_a_dash() -> None:
    assert short_utc(None) == "-"
