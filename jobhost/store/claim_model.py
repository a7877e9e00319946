"""The words of a claim: what a claimed run is, what the firing rules answer for a due schedule
row, and what one claim did. No SQL here; :mod:`jobhost.store.claims` claims."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from jobhost.records import PlannedRow, SchedulePlan

__all__ = [
    "ClaimRules",
    "schedule_problem",
]


class ClaimRules(Protocol):
    """The firing policy, as :func:`claim_work` asks for it; no SQL on this side."""

    def knows(self, job_name: str) -> bool:
        """Whether this host can run the job (a job it does not know is left to others)."""
        ...

    def lease(self, job_name: str) -> timedelta: ...

    def counts_live_runs(self, job_name: str) -> bool:
        """Whether deciding overlap needs the number of live runs (more than one allowed)."""
        ...

    def may_start(self, job_name: str, live_runs: int, lease_live: bool) -> bool: ...

    def plan(self, row: PlannedRow, now: datetime, blocked: bool) -> SchedulePlan | None:
        """The plan for a due row; None leaves the row untouched (its problem is reported)."""
        ...


def schedule_problem(row: PlannedRow) -> str | None:
    """What makes a stored schedule row unusable, or None. The row is never guessed at."""
    if isinstance(row.fencing_token, bool) or not isinstance(row.fencing_token, int):
        return (
            f"fencing_token is {row.fencing_token!r}, not a whole number; set it to the highest "
            "fencing_token of the job's runs (or 0 for a job that never ran)"
        )
    if row.fencing_token < 0:
        return f"fencing_token is {row.fencing_token}, below 0; set it to 0 or more"
    if row.trigger_kind == "interval" and row.interval_anchor is None:
        return (
            "interval_anchor is not a time; set it to the job's last occurrence "
            "(or restart a host to let it re-anchor the job at its next occurrence)"
        )
    return None
