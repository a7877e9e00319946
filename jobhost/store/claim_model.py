"""The words of a claim: what a claimed run is, what the firing rules answer for a due schedule
row, and what one claim did. No SQL here; :mod:`jobhost.store.claims` claims."""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from jobhost.store.records import PlannedRow

__all__ = [
    "Claim",
    "ClaimBatch",
    "ClaimRules",
    "SchedulePlan",
    "new_run_id",
    "occurrence_key",
    "occurrence_text",
    "schedule_problem",
]


@dataclass(frozen=True, slots=True)
class Claim:
    """A run this host now owns: execute it, renew its lease, finish it."""

    run_id: str
    job_name: str
    occurrence: datetime | None
    attempt: int
    source: str
    fencing_token: int
    idempotency_key: str
    started_at: datetime
    requested_by: str | None = None
    reason: str | None = None
    lease_until: datetime | None = None
    backfill_id: str | None = None
    attempt_base: int = 0
    """Attempts of the occurrence before this run's lane (a backfill's) began: the retry
    budget counts from there."""
    record_by: datetime | None = None
    """When a claim next looks at this job's row (its next occurrence) for a scheduled run of a
    job outside any concurrency group: until then a later record changes no decision, so a
    busy host may hold it back to start due runs first. None: record as soon as it ends."""


@dataclass(frozen=True, slots=True)
class SchedulePlan:
    """What the firing rules decided for one due schedule row.

    ``next_occurrence`` and ``due_at`` are the values to store; ``not_run`` holds
    (occurrence, outcome, reason) rows for occurrences recorded without an attempt.
    """

    next_occurrence: datetime | None
    due_at: datetime | None
    missed_through: datetime | None = None
    run: datetime | None = None
    source: str = "schedule"
    not_run: Sequence[tuple[datetime, str, str]] = ()


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


@dataclass
class ClaimBatch:
    """What one call of :func:`claim_work` did."""

    claims: list[Claim] = field(default_factory=list)
    not_run: list[tuple[str, datetime, str, str]] = field(default_factory=list)
    """(job, occurrence, outcome, reason) newly recorded without an attempt."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(run id, message) for manual runs that cannot run, recorded skipped."""
    unknown: set[str] = field(default_factory=set)
    """Jobs with due work this host does not know: leave them to hosts that do."""
    corrupt: dict[str, str] = field(default_factory=dict)
    """Job name → what is wrong with its schedule row; the row is left as it is."""
    schedules_seen: int = 0
    """Due schedule rows read: as many as the slots allowed means more may be due."""
    group_waits: Counter[str] = field(default_factory=Counter)
    """Concurrency group → occurrences and runs that began waiting for a slot in this batch."""
    waiting: set[str] = field(default_factory=set)
    """Jobs whose due work waits for a live run to end: that run's record lets it start."""
    backfill_more: bool = False
    """A backfill may have more to claim than the slots allowed: look again next turn."""
    backfill_yielded: set[str] = field(default_factory=set)
    """Jobs whose backfill waits for one of the job's own runs (or its group): look again when
    one of them ends."""


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


def occurrence_key(job_name: str, occurrence: datetime) -> str:
    """The idempotency key shared by every attempt at one occurrence."""
    return f"{job_name}:{occurrence_text(occurrence)}"


@functools.lru_cache(maxsize=1024)
def occurrence_text(occurrence: datetime) -> str:
    """An occurrence to the second in UTC, as its idempotency key and its run's span say it."""
    # Cached: the jobs of one instant share their occurrence, and strftime costs microseconds.
    # In UTC, so the instants the cache holds as equal read the same.
    return occurrence.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    return uuid.uuid4().hex
