"""A job's status in one word, and the summary of a catalog by status.

The status is what an operator scans for; the report's ``state`` (enabled, disabled, paused,
orphaned) stays what it was. In order of precedence (a job has the first that applies):

- ``paused``, ``disabled``, ``orphaned`` (in the store, declared by no module), ``invalid``
  (declared with problems);
- ``stuck``: a lease expired but is still held (``lease-expired``), or a run's executor ignored
  its cancellation and its thread runs on (``stuck-code``);
- ``running``: a run is running now;
- ``waiting``: a due occurrence, retry or manual run waits for a slot of its concurrency group;
- ``failing``: its last attempt failed, timed out or was abandoned;
- ``overdue``: an occurrence came due more than its grace ago and no success followed it;
- ``behind``: its next fire is in the past, or nothing schedules one (``next-fire-past``,
  ``no-next-fire``);
- ``ok``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from jobhost.records import HostRecord

__all__ = ["FAILED_OUTCOMES", "STATUSES", "Status", "Summary", "job_status", "summarise"]

Status = Literal[
    "ok",
    "failing",
    "overdue",
    "behind",
    "stuck",
    "running",
    "waiting",
    "paused",
    "disabled",
    "orphaned",
    "invalid",
]
STATUSES: tuple[Status, ...] = get_args(Status)
FAILED_OUTCOMES = frozenset({"failed", "timed_out", "abandoned"})


def job_status(
    state: str,
    codes: Sequence[str],
    last_outcome: str | None,
    running: bool,
    waiting: bool = False,
) -> Status:
    """The status of a job in ``state`` with mismatch ``codes`` and ``last_outcome``;
    ``waiting`` when work of the job waits for a slot of its concurrency group."""
    if state == "paused":
        return "paused"
    if state == "disabled":
        return "disabled"
    if state == "orphaned":
        return "orphaned"
    if "invalid" in codes:
        return "invalid"
    if "lease-expired" in codes or "stuck-code" in codes:
        return "stuck"
    if running or last_outcome == "running":
        return "running"
    if waiting:
        return "waiting"
    if last_outcome in FAILED_OUTCOMES:
        return "failing"
    if "overdue" in codes:
        return "overdue"
    if "next-fire-past" in codes or "no-next-fire" in codes:
        return "behind"
    return "ok"


@dataclass(frozen=True)
class Summary:
    """Jobs by status, and the live hosts with their worst lag and clock skew."""

    jobs: int
    by_status: dict[Status, int]
    live_hosts: int
    max_lag_seconds: float | None
    max_clock_skew_seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "by_status": dict(self.by_status),
            "live_hosts": self.live_hosts,
            "max_lag_seconds": self.max_lag_seconds,
            "max_clock_skew_seconds": self.max_clock_skew_seconds,
        }


def summarise(statuses: Sequence[Status], hosts: Sequence[HostRecord]) -> Summary:
    counts: dict[Status, int] = dict.fromkeys(STATUSES, 0)
    for status in statuses:
        counts[status] += 1
    lags = [h.schedule_lag_seconds for h in hosts if h.schedule_lag_seconds is not None]
    skews = [abs(h.clock_skew_seconds) for h in hosts]
    return Summary(
        jobs=len(statuses),
        by_status=counts,
        live_hosts=len(hosts),
        max_lag_seconds=round(max(lags), 3) if lags else None,
        max_clock_skew_seconds=round(max(skews), 3) if skews else None,
    )
