"""Every daylight-saving policy on both transitions of several zones, against a brute force.

The expected occurrences come from walking every local wall minute around a transition and
asking ``zoneinfo`` with ``fold=0`` / ``fold=1`` whether it exists once, twice or not at all;
nothing here shares code with the trigger math under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from jobhost_contracts import DstGap, DstRepeat

from jobhost.triggers import cron_schedule

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]
# Fixed-time expressions as (minutes, hours): each hits the skipped and the repeated local
# times of every zone above (their transitions fall between 00:00 and 04:00 local).
EXPRESSIONS = [
    ((30,), (2,)),
    ((0,), (2,)),
    ((45,), (1,)),
    ((0, 15, 30, 45), (0, 1, 2, 3)),
    ((0,), (3,)),
]
MINUTE = timedelta(minutes=1)


def _transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    """The instants in ``year`` at which the zone's offset changes, found hour by hour."""
    found = []
    moment = datetime(year, 1, 1, tzinfo=UTC)
    previous = moment.astimezone(zone).utcoffset()
    while moment.year == year:
        following = moment + timedelta(hours=1)
        offset = following.astimezone(zone).utcoffset()
        if offset != previous:
            low, high = moment, following
            while high - low > MINUTE:
                middle = low + (high - low) / 2
                if middle.astimezone(zone).utcoffset() == previous:
                    low = middle
                else:
                    high = middle
            found.append(high)
        previous, moment = offset, following
    return found


def _offset(zone: ZoneInfo, moment: datetime) -> timedelta:
    return moment.astimezone(zone).utcoffset() or timedelta(0)


def _instant(wall: datetime, zone: ZoneInfo, fold: int) -> datetime:
    return wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)


def _exists(wall: datetime, zone: ZoneInfo) -> bool:
    return _instant(wall, zone, 0).astimezone(zone).replace(tzinfo=None) == wall


def _brute_force(
    minutes: tuple[int, ...],
    hours: tuple[int, ...],
    zone: ZoneInfo,
    low: datetime,
    high: datetime,
    gap: DstGap,
    repeat: DstRepeat,
) -> tuple[list[datetime], list[datetime]]:
    """(occurrences, skipped) with instants in ``(low, high]``, walking local minutes."""
    fires: set[datetime] = set()
    skipped: set[datetime] = set()
    wall = low.astimezone(zone).replace(tzinfo=None) - timedelta(days=1)
    end = high.astimezone(zone).replace(tzinfo=None) + timedelta(days=1)
    while wall <= end:
        if wall.minute in minutes and wall.hour in hours:
            if not _exists(wall, zone):
                if gap is DstGap.SHIFT:
                    after = wall
                    while not _exists(after, zone):
                        after += MINUTE
                    fires.add(_instant(after, zone, 0))
                else:
                    skipped.add(_instant(wall, zone, 0))
            else:
                first, second = _instant(wall, zone, 0), _instant(wall, zone, 1)
                if first == second or repeat in {DstRepeat.ONCE, DstRepeat.FIRST}:
                    fires.add(first)
                elif repeat is DstRepeat.SECOND:
                    fires.add(second)
                else:
                    fires.update({first, second})
        wall += MINUTE

    def inside(items: set[datetime]) -> list[datetime]:
        return sorted(i for i in items if low < i <= high)

    return inside(fires), inside(skipped)


CASES = [
    pytest.param(zone, index, id=f"{zone}-{'spring' if index == 0 else 'autumn'}")
    for zone in ZONES
    for index in (0, 1)
]


@pytest.mark.parametrize(("zone_name", "which"), CASES)
@pytest.mark.parametrize("gap", list(DstGap))
@pytest.mark.parametrize("repeat", list(DstRepeat))
def test_every_policy_matches_the_brute_force_walk(
    zone_name: str, which: int, gap: DstGap, repeat: DstRepeat
) -> None:
    zone = ZoneInfo(zone_name)
    transitions = _transitions(zone, 2026)
    assert len(transitions) == 2
    # Spring-forward first: the transition after which the clock reads later.
    transitions.sort(key=lambda t: _offset(zone, t - MINUTE) - _offset(zone, t))
    transition = transitions[which]
    low, high = transition - timedelta(days=2), transition + timedelta(days=2)
    for minutes, hours in EXPRESSIONS:
        expression = f"{','.join(map(str, minutes))} {','.join(map(str, hours))} * * *"
        schedule = cron_schedule(expression, zone_name, dst_gap=gap, dst_repeat=repeat)
        expected, expected_skipped = _brute_force(minutes, hours, zone, low, high, gap, repeat)
        got = [i for i in schedule.iter_after(low, len(expected) + 2) if i <= high]
        assert got == expected, (expression, zone_name, gap, repeat)
        assert schedule.skipped_between(low, high) == expected_skipped, expression
        # Asked from any point in between, the next occurrence is the brute force's next one.
        for start in expected:
            later = [i for i in expected if i > start]
            if later:
                assert schedule.next_after(start) == later[0]


@pytest.mark.parametrize("gap", list(DstGap))
@pytest.mark.parametrize("repeat", list(DstRepeat))
def test_a_wildcard_job_follows_real_time_whatever_the_policy(
    gap: DstGap, repeat: DstRepeat
) -> None:
    start = datetime(2026, 10, 24, 23, 0, tzinfo=UTC)
    default = cron_schedule("*/30 * * * *", "Europe/Berlin")
    chosen = cron_schedule("*/30 * * * *", "Europe/Berlin", dst_gap=gap, dst_repeat=repeat)
    assert chosen.iter_after(start, 12) == default.iter_after(start, 12)
    assert chosen.skipped_between(start, start + timedelta(days=200)) == []


def test_the_default_policy_is_debian_crons_rule() -> None:
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    default = cron_schedule("30 2 * * *", "Europe/Berlin")
    explicit = cron_schedule("30 2 * * *", "Europe/Berlin", dst_gap="shift", dst_repeat="once")  # type: ignore[arg-type]
    assert default == explicit
    # 02:30 does not exist on 29 March: it fires at 03:00 CEST, the first instant after the gap.
    assert default.next_after(start) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert default.describe() == "cron '30 2 * * *' in Europe/Berlin"


def test_skip_names_the_instant_of_a_skipped_local_time() -> None:
    schedule = cron_schedule("30 2 * * *", "Europe/Berlin", dst_gap=DstGap.SKIP)
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    # 02:30 read with the winter offset (+01:00), as zoneinfo's fold=0 reads it.
    (skipped,) = schedule.skipped_between(start, start + timedelta(days=2))
    assert skipped == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert schedule.next_after(start) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)
    assert schedule.describe() == "cron '30 2 * * *' in Europe/Berlin, dst_gap=skip"
