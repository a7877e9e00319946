"""Summaries the store reads for the CLI, the API and the dashboard."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from jobhost.records.changes import JobChange
from jobhost.records.rows import PENDING, HostRecord, LastAttempt, RunRecord, ScheduleRow
from jobhost.records.runs import Failing


@dataclass(frozen=True)
class GroupSummary:
    """One group as operators see it: its limit, its running runs, what waits for a slot."""

    name: str
    limit: int
    running: int
    waiting: int
    waiting_jobs: tuple[str, ...] = field(default=())
    """Jobs with a scheduled occurrence, retry or manual run waiting for a slot."""

    def status(self) -> str:
        return f"waiting for group {self.name}, {self.running} of {self.limit} busy"

    def to_json(self) -> dict[str, object]:
        return {
            "group": self.name,
            "limit": self.limit,
            "running": self.running,
            "waiting": self.waiting,
            "waiting_jobs": list(self.waiting_jobs),
        }


@dataclass(frozen=True)
class StoreSnapshot:
    """What the store says, at ``now``."""

    now: datetime
    schedules: Mapping[str, ScheduleRow]
    """Whole rows, or as the summary reads them (:func:`read_snapshot` without ``whole``)."""
    hosts: list[HostRecord]
    last_runs: dict[str, LastAttempt] = field(default_factory=dict)
    recent_outcomes: dict[str, list[str]] = field(default_factory=dict)
    last_success: dict[str, datetime] = field(default_factory=dict)
    expired_runs: dict[str, list[RunRecord]] = field(default_factory=dict)
    running: dict[str, list[RunRecord]] = field(default_factory=dict)
    """Each job's runs still running, oldest first."""
    groups: list[GroupSummary] = field(default_factory=list)
    """Every concurrency group with its limit, running runs and waiting work."""
    deleted: dict[str, JobChange] = field(default_factory=dict)
    """How each runtime job removed through the API was removed (by whom, when)."""
    failing: dict[str, Failing] = field(default_factory=dict)
    """The failing jobs, when asked for (:func:`read_snapshot` with ``failing``)."""

    @property
    def live_hosts(self) -> list[HostRecord]:
        return [host for host in self.hosts if host.alive(self.now)]


RECENT = 5
"""How many outcomes ``recent_outcomes`` shows."""


NOT_ATTEMPTS = ("missed", "skipped", PENDING)
"""Ledger rows that are not an attempt to run: ``last_run`` passes over them."""


GUESS_KEY_LENGTH = 200


# What an operator's action on one run wrote, as the store answers it.


@dataclass(frozen=True)
class RetryWritten:
    """The retry queued: ``run_id`` the new run at ``attempt``, ``retry_of`` the run retried."""

    run_id: str
    attempt: int
    retry_of: RunRecord
    at: datetime


@dataclass(frozen=True)
class CancelWritten:
    """``state``: ``requested`` (written on the running run), ``already`` (asked before),
    ``cancelled`` (pending: recorded cancelled) or ``started`` (a pending run started meanwhile:
    nothing written)."""

    run: RunRecord
    state: str
    at: datetime


@dataclass(frozen=True)
class Acknowledged:
    run: RunRecord
    at: datetime
