"""The store's rows as typed values: schedules, runs, hosts, and the words their columns use."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, NamedTuple, Self

from jobhost_contracts import UnitCounts
from sqlalchemy.engine import RowMapping

RUNNING = "running"
PENDING = "pending"
SKIPPED = "skipped"
# The order in which pending runs are claimed, lowest first: a person waits on a manual run; a
# backfill yields to everything else.
PRIORITY_MANUAL = 0
PRIORITY_RETRY = 1
PRIORITY_BACKFILL = 2
TERMINAL_OUTCOMES = frozenset(
    {"succeeded", "failed", "timed_out", "cancelled", "abandoned", "skipped", "missed"}
)


class _FromRow:
    @classmethod
    def from_row(cls, row: RowMapping | dict[str, Any]) -> Self:
        names = _FIELDS.get(cls)
        if names is None:
            # Computed once per class: reports build tens of thousands of records.
            names = _FIELDS[cls] = frozenset(f.name for f in fields(cls))  # type: ignore[arg-type]
        return cls(**{k: v for k, v in row.items() if k in names})


_FIELDS: dict[type, frozenset[str]] = {}


@dataclass(frozen=True, slots=True)
class ScheduleRecord(_FromRow):
    job_name: str
    module: str
    trigger_kind: str | None
    trigger_expression: str | None
    timezone: str
    trigger_source: str
    enabled: bool
    orphaned: bool
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    paused_reason: str | None
    next_occurrence: datetime | None
    interval_anchor: datetime | None
    missed_through: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    lease_run_id: str | None
    fencing_token: int
    last_run_id: str | None
    last_outcome: str | None
    last_started_at: datetime | None
    last_finished_at: datetime | None
    last_error: str | None
    last_success_at: datetime | None
    created_at: datetime
    updated_at: datetime
    catalog_version: str | None = None
    due_at: datetime | None = None
    concurrency_group: str | None = None
    group_waiting_since: datetime | None = None
    declaration: str | None = None
    """The effective declaration as JSON (see :mod:`jobhost.catalog.stored`); None until synced."""

    def lease_live(self, now: datetime) -> bool:
        return (
            self.lease_owner is not None
            and self.lease_expires_at is not None
            and self.lease_expires_at >= now
        )


class ScheduleSummary(NamedTuple):
    """A schedule row as a summary of every job reads it: :class:`ScheduleRecord` without the
    columns only the firing loop and the store's own catalog use (the missed and due marks,
    the fencing token, the declaration), which the dashboard would read and decode for
    10,000 jobs every few seconds for nothing.

    A named tuple, not a frozen dataclass: made from the row in one step, it costs a tenth as
    much (the dataclass sets each of its 25 fields through ``object.__setattr__``)."""

    job_name: str
    module: str
    trigger_kind: str | None
    trigger_expression: str | None
    timezone: str
    trigger_source: str
    enabled: bool
    orphaned: bool
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    paused_reason: str | None
    next_occurrence: datetime | None
    interval_anchor: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    lease_run_id: str | None
    last_run_id: str | None
    last_outcome: str | None
    last_started_at: datetime | None
    last_finished_at: datetime | None
    last_error: str | None
    last_success_at: datetime | None
    created_at: datetime
    concurrency_group: str | None


ScheduleRow = ScheduleRecord | ScheduleSummary
"""A schedule row as a report reads it: whole, or as the summary reads it."""


class DueSchedule(NamedTuple):
    """A schedule row as a claim reads it: only the columns planning, leasing and concurrency
    groups use, made from the row in one step. A busy host reads thousands a second; the whole
    row (the declaration, the last run's summary) cost it a tenth of its CPU to decode."""

    job_name: str
    trigger_kind: str | None
    trigger_expression: str | None
    timezone: str
    enabled: bool
    orphaned: bool
    paused: bool
    next_occurrence: datetime | None
    interval_anchor: datetime | None
    missed_through: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    fencing_token: int
    created_at: datetime
    due_at: datetime | None
    concurrency_group: str | None
    group_waiting_since: datetime | None


PlannedRow = ScheduleRecord | DueSchedule
"""A schedule row as planning reads it: whole, or as a claim reads it."""


@dataclass(frozen=True, slots=True)
class RunRecord(_FromRow):
    id: str
    job_name: str
    occurrence: datetime | None
    attempt: int
    source: str
    outcome: str
    reason: str | None
    host_id: str | None
    fencing_token: int | None
    idempotency_key: str | None
    requested_by: str | None
    queued_at: datetime
    not_before: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    lease_expires_at: datetime | None
    error_type: str | None
    error_message: str | None
    trace_id: str | None
    units_total: int | None = None
    units_succeeded: int | None = None
    units_failed: int | None = None
    units_skipped_already_done: int | None = None
    group_waiting_since: datetime | None = None
    backfill_id: str | None = None
    cancel_requested_by: str | None = None
    cancel_requested_at: datetime | None = None
    cancel_reason: str | None = None
    priority: int = PRIORITY_RETRY
    beside_limit: bool = False
    attempt_base: int = 0
    result: str | None = None

    @property
    def request_status(self) -> str:
        """A manual run as the command, page or API call that queued it sees it: ``pending``
        (no claim has looked at it), ``queued`` (waiting for a slot of its concurrency group),
        ``refused`` (recorded skipped; ``reason`` says why) or ``started``."""
        if self.outcome == PENDING:
            return "queued" if self.group_waiting_since is not None else "pending"
        if self.outcome == SKIPPED and self.started_at is None:
            return "refused"
        return "started"

    @property
    def request_message(self) -> str | None:
        """Why a manual run is refused or queued (see :attr:`request_status`); else None."""
        status = self.request_status
        if status == "refused":
            return self.reason or "refused"
        if status == "queued":
            return "queued: waiting for a free slot of the job's concurrency group"
        return None

    @property
    def units(self) -> UnitCounts | None:
        """The counts of the run's fan-outs; None for a run without one."""
        if self.units_total is None:
            return None
        return UnitCounts(
            total=self.units_total,
            succeeded=self.units_succeeded or 0,
            failed=self.units_failed or 0,
            skipped_already_done=self.units_skipped_already_done or 0,
        )

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return round((self.finished_at - self.started_at).total_seconds() * 1000)


@dataclass(frozen=True, slots=True)
class LastAttempt:
    """What the report shows of a job's last attempt: a few columns of its ledger row (read for
    every job at once, where the whole row would cost several times as much)."""

    id: str
    outcome: str
    host_id: str | None
    started_at: datetime | None
    finished_at: datetime | None
    error_type: str | None
    error_message: str | None
    backfill_id: str | None

    @classmethod
    def of(cls, run: RunRecord) -> LastAttempt:
        return cls(*(getattr(run, field.name) for field in fields(cls)))

    @classmethod
    def recorded(cls, row: ScheduleRow) -> LastAttempt | None:
        """The last finished attempt ``row`` records (recording a run writes it there), without
        what only its ledger row holds: the host, error type and backfill are None."""
        if row.last_run_id is None or row.last_outcome is None:
            return None
        if row.last_started_at is None and row.last_finished_at is None:
            return None
        return cls(
            row.last_run_id,
            row.last_outcome,
            None,
            row.last_started_at,
            row.last_finished_at,
            None,
            row.last_error,
            None,
        )

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return round((self.finished_at - self.started_at).total_seconds() * 1000)


@dataclass(frozen=True, slots=True)
class HostRecord(_FromRow):
    id: str
    hostname: str
    pid: int
    version: str
    started_at: datetime
    last_seen_at: datetime
    host_clock_at: datetime
    heartbeat_seconds: int
    stopped_at: datetime | None
    catalog_version: str | None = None
    synced_at: datetime | None = None
    schedule_lag_seconds: float | None = None

    def alive(self, now: datetime) -> bool:
        """Seen within three heartbeat intervals and not stopped."""
        if self.stopped_at is not None:
            return False
        return (now - self.last_seen_at).total_seconds() <= 3 * max(self.heartbeat_seconds, 1)

    @property
    def clock_skew_seconds(self) -> float:
        """The host's clock minus the database's, at the last heartbeat."""
        return (self.host_clock_at - self.last_seen_at).total_seconds()
