"""The newest due occurrence depends on the daylight-saving policy as well as the expression."""

from __future__ import annotations

from datetime import UTC, datetime

from jobhost_contracts import DstGap

from jobhost.catalog.model import EffectiveTrigger
from jobhost.operations import mismatch
from jobhost.operations.mismatch import trigger_last_due
from jobhost.triggers import cron_schedule

# 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day.
GAP_DAY_0310 = datetime(2026, 3, 29, 1, 10, tzinfo=UTC)
PREVIOUS_DAY_0230 = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)


def _last_due(gap: DstGap) -> datetime | None:
    trigger = EffectiveTrigger(
        kind="cron",
        expression="30 2 * * *",
        interval=None,
        timezone="Europe/Berlin",
        source="declaration",
        dst_gap=gap,
    )
    schedule = cron_schedule("30 2 * * *", "Europe/Berlin", dst_gap=gap)
    return trigger_last_due(trigger, lambda _anchor: schedule, GAP_DAY_0310, GAP_DAY_0310)


def test_two_jobs_on_one_cron_and_zone_with_different_gap_policies_get_their_own_answer() -> None:
    mismatch._LAST_DUE.clear()
    skipped = _last_due(DstGap.SKIP)
    shifted = _last_due(DstGap.SHIFT)

    assert skipped == PREVIOUS_DAY_0230
    assert shifted is not None and PREVIOUS_DAY_0230 < shifted <= GAP_DAY_0310
    # Asked again, in the other order, from what the first questions kept.
    assert _last_due(DstGap.SHIFT) == shifted
    assert _last_due(DstGap.SKIP) == skipped
