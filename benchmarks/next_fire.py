"""Next-fire computation, side by side with cronsim: ``python benchmarks/next_fire.py``.

``next_after`` runs for every job on every tick, so its cost is printed per call for ordinary
days, days next to a daylight-saving transition, and the OR day rule, beside the same question
answered by cronsim (an independent crontab implementation) on the same machine in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from jobhost.triggers import cron_schedule

CASES = [
    ("*/5 * * * *", "Europe/Berlin", datetime(2026, 5, 12, 10, 3, 7, tzinfo=UTC)),
    ("*/5 * * * *", "UTC", datetime(2026, 5, 12, 10, 3, 7, tzinfo=UTC)),
    ("30 2 * * *", "Europe/Berlin", datetime(2026, 5, 12, 10, 3, 7, tzinfo=UTC)),
    ("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 23, 0, tzinfo=UTC)),
    ("*/5 * * * *", "Europe/Berlin", datetime(2026, 10, 25, 0, 10, tzinfo=UTC)),
    ("0 0 13 * 5", "America/New_York", datetime(2026, 5, 12, 10, 3, 7, tzinfo=UTC)),
]
CALLS = 2000


def main() -> None:
    columns = f"{'expression':<14} {'zone':<18} {'after':<22}"
    print(f"{columns} {'jobhost':>10} {'cronsim':>10} {'ratio':>6}")
    for expression, zone, after in CASES:
        schedule = cron_schedule(expression, zone)
        ours = _per_call(schedule.next_after, after)
        theirs = _per_call(_cronsim(expression, ZoneInfo(zone)), after)
        print(
            f"{expression:<14} {zone:<18} {after:%Y-%m-%d %H:%M}Z{'':<5} "
            f"{ours * 1e6:>8.1f}µs {theirs * 1e6:>8.1f}µs {ours / theirs:>6.2f}"
        )


def _cronsim(expression: str, zone: ZoneInfo) -> Callable[[datetime], object]:
    return lambda at: next(CronSim(expression, at.astimezone(zone)))


def _per_call(call: Callable[[datetime], object], after: datetime) -> float:
    call(after)  # first use of a zone computes its transitions once
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for index in range(CALLS):
            call(after + timedelta(seconds=index))
        best = min(best, (time.perf_counter() - started) / CALLS)
    return best


if __name__ == "__main__":
    main()
