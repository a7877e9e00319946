"""Daylight saving as Debian's cron resolves it, and time zone names.

Transitions used (UTC):
- Europe/Berlin 2026: 03-29 01:00 (02:00 CET -> 03:00 CEST), 10-25 01:00 (03:00 CEST -> 02:00 CET);
  02:00-02:59 is repeated: first pass 00:00-00:59Z, second pass 01:00-01:59Z.
- America/New_York 2026: 03-08 07:00 (02:00 EST -> 03:00 EDT), 11-01 06:00 (02:00 EDT ->
  01:00 EST); 01:00-01:59 is repeated: first pass 05:00-05:59Z, second pass 06:00-06:59Z.
- Australia/Lord_Howe 2026, a 30-minute shift: 04-04 15:00 (local 04-05 02:00 +11:00 -> 01:30
  +10:30; 01:30-01:59 repeated: first pass 14:30-14:59Z, second 15:00-15:29Z), 10-03 15:30
  (local 10-04 02:00 +10:30 -> 02:30 +11:00; 02:00-02:29 does not exist).
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from itertools import pairwise

import pytest

from jobhost.triggers import UnknownTimezoneError, cron_schedule, load_zone

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"


def at(year: int, month: int, day: int, *time: int) -> datetime:
    """A UTC datetime; ``time`` is hour, minute, second, microsecond, as far as needed."""
    hour, minute, second, micro = (*time, 0, 0, 0, 0)[:4]
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


# (expression, zone, after, expected occurrences)
SPRING_FORWARD = [
    # fixed time: a skipped local time fires once, at the first instant after the gap
    ("30 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30, 0, 30)]),
    ("59 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30, 0, 59)]),
    ("0 30 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30, 0, 30)]),
    # two local times in the gap, and one after it, are one occurrence at 03:00 CEST
    ("0,30 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30)]),
    ("0 2,3 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30)]),
    ("* 30 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 30, 0, 30)]),
    ("30 2,3 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 29, 1), at(2026, 3, 29, 1, 30)]),
    ("30 2 * * *", NEW_YORK, at(2026, 3, 7, 12), [at(2026, 3, 8, 7), at(2026, 3, 9, 6, 30)]),
    ("15 2 * * *", LORD_HOWE, at(2026, 10, 3), [at(2026, 10, 3, 15, 30), at(2026, 10, 4, 15, 15)]),
    ("0,15 2 * * *", LORD_HOWE, at(2026, 10, 3), [at(2026, 10, 3, 15, 30), at(2026, 10, 4, 15)]),
    ("45 2 * * *", LORD_HOWE, at(2026, 10, 3), [at(2026, 10, 3, 15, 45), at(2026, 10, 4, 15, 45)]),
    # after the gap's occurrence, the next day
    ("30 2 * * *", BERLIN, at(2026, 3, 29, 1), [at(2026, 3, 30, 0, 30)]),
    # wildcard: local times in the gap do not exist and do not fire
    ("*/30 2 * * *", BERLIN, at(2026, 3, 28, 12), [at(2026, 3, 30), at(2026, 3, 30, 0, 30)]),
    ("* 2 * * *", BERLIN, at(2026, 3, 28, 23, 59), [at(2026, 3, 30)]),
    (
        "30 * * * *",
        BERLIN,
        at(2026, 3, 29),
        [at(2026, 3, 29, 0, 30), at(2026, 3, 29, 1, 30), at(2026, 3, 29, 2, 30)],
    ),
    (
        "*/30 * * * *",
        NEW_YORK,
        at(2026, 3, 8, 6),
        [at(2026, 3, 8, 6, 30), at(2026, 3, 8, 7), at(2026, 3, 8, 7, 30)],
    ),
    (
        "*/15 * * * *",
        LORD_HOWE,
        at(2026, 10, 3, 15),
        [at(2026, 10, 3, 15, 15), at(2026, 10, 3, 15, 30), at(2026, 10, 3, 15, 45)],
    ),
]

FALL_BACK = [
    # fixed time: a repeated local time fires on the first pass only
    (
        "30 2 * * *",
        BERLIN,
        at(2026, 10, 24, 12),
        [at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)],
    ),
    (
        "30 1 * * *",
        NEW_YORK,
        at(2026, 10, 31, 12),
        [at(2026, 11, 1, 5, 30), at(2026, 11, 2, 6, 30)],
    ),
    ("45 1 * * *", LORD_HOWE, at(2026, 4, 4), [at(2026, 4, 4, 14, 45), at(2026, 4, 5, 15, 15)]),
    # `after` inside the first pass
    (
        "30 2 * * *",
        BERLIN,
        at(2026, 10, 25, 0, 10),
        [at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)],
    ),
    ("30 2 * * *", BERLIN, at(2026, 10, 25, 0, 30), [at(2026, 10, 26, 1, 30)]),
    ("0 1 * * *", NEW_YORK, at(2026, 11, 1, 5), [at(2026, 11, 2, 6)]),
    # `after` inside the second pass: the first pass is behind, nothing fires again
    ("30 2 * * *", BERLIN, at(2026, 10, 25, 1, 10), [at(2026, 10, 26, 1, 30)]),
    ("0 2 * * *", BERLIN, at(2026, 10, 25, 1), [at(2026, 10, 26, 1)]),
    ("0 2,3 * * *", BERLIN, at(2026, 10, 25, 1, 10), [at(2026, 10, 25, 2), at(2026, 10, 26, 1)]),
    ("30 1 * * *", NEW_YORK, at(2026, 11, 1, 6, 10), [at(2026, 11, 2, 6, 30)]),
    ("45 1 * * *", LORD_HOWE, at(2026, 4, 4, 15, 5), [at(2026, 4, 5, 15, 15)]),
    # wildcard: a repeated local time fires on both passes
    (
        "*/30 2 * * *",
        BERLIN,
        at(2026, 10, 24, 12),
        [
            at(2026, 10, 25, 0),
            at(2026, 10, 25, 0, 30),
            at(2026, 10, 25, 1),
            at(2026, 10, 25, 1, 30),
        ],
    ),
    (
        "30 * * * *",
        BERLIN,
        at(2026, 10, 24, 23),
        [at(2026, 10, 24, 23, 30), at(2026, 10, 25, 0, 30), at(2026, 10, 25, 1, 30)],
    ),
    (
        "30 * * * *",
        NEW_YORK,
        at(2026, 11, 1, 4),
        [at(2026, 11, 1, 4, 30), at(2026, 11, 1, 5, 30), at(2026, 11, 1, 6, 30)],
    ),
    (
        "45 * * * *",
        LORD_HOWE,
        at(2026, 4, 4, 14),
        [at(2026, 4, 4, 14, 45), at(2026, 4, 4, 15, 15), at(2026, 4, 4, 16, 15)],
    ),
    # wildcard, `after` inside the first pass, then inside the second
    (
        "30 * * * *",
        BERLIN,
        at(2026, 10, 25, 0, 10),
        [at(2026, 10, 25, 0, 30), at(2026, 10, 25, 1, 30)],
    ),
    (
        "30 * * * *",
        BERLIN,
        at(2026, 10, 25, 1, 10),
        [at(2026, 10, 25, 1, 30), at(2026, 10, 25, 2, 30)],
    ),
    (
        "45 * * * *",
        LORD_HOWE,
        at(2026, 4, 4, 15, 5),
        [at(2026, 4, 4, 15, 15), at(2026, 4, 4, 16, 15)],
    ),
    ("* 2 * * *", BERLIN, at(2026, 10, 25, 0, 59), [at(2026, 10, 25, 1), at(2026, 10, 25, 1, 1)]),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), SPRING_FORWARD)
def test_spring_forward(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    assert cron_schedule(expression, zone).iter_after(after, len(expected)) == expected


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), FALL_BACK)
def test_fall_back(expression: str, zone: str, after: datetime, expected: list[datetime]) -> None:
    assert cron_schedule(expression, zone).iter_after(after, len(expected)) == expected


def test_a_wildcard_hour_repeats_120_minutes_on_the_fall_back_day() -> None:
    found = cron_schedule("* 2 * * *", BERLIN).iter_after(at(2026, 10, 24, 12), 121)
    assert [instant.date().isoformat() for instant in found].count("2026-10-25") == 120
    assert found[-1] == at(2026, 10, 26, 1)


def test_steady_every_five_minutes_across_both_transitions() -> None:
    # Real time keeps flowing: always five minutes apart, never a repeat nor a hole.
    for start in (at(2026, 3, 28, 22), at(2026, 10, 24, 22)):
        found = cron_schedule("*/5 * * * *", BERLIN).iter_after(start, 12 * 6)
        assert {b - a for a, b in pairwise(found)} == {found[1] - found[0]}


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "Etc/GMT+5", "Asia/Kolkata"])
def test_load_zone_knows_iana_names(name: str) -> None:
    assert load_zone(name).key == name


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Base",
        "",
        "../etc",
        "/etc/passwd",
        "Europe",
        "Europe/Berlin ",
        "utc",
        "zone.tab",
        "a\0b",
    ],
)
def test_load_zone_refuses_anything_else(name: str) -> None:
    with pytest.raises(UnknownTimezoneError) as caught:
        load_zone(name)
    assert caught.value.timezone == name
    assert str(caught.value).startswith(
        f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
    )
    assert isinstance(caught.value, LookupError)


def test_unknown_zone_message() -> None:
    with pytest.raises(UnknownTimezoneError) as caught:
        cron_schedule("0 3 * * *", "Mars/Base")
    assert str(caught.value) == (
        "unknown time zone 'Mars/Base': use an IANA name such as 'Europe/Berlin' or 'UTC'"
    )
    assert pickle.loads(pickle.dumps(caught.value)).timezone == "Mars/Base"


def test_a_wrongly_cased_zone_gets_a_suggestion() -> None:
    with pytest.raises(UnknownTimezoneError, match=r"did you mean 'Europe/Berlin'\?"):
        load_zone("europe/berlin")
