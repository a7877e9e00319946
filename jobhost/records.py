"""The store's vocabulary: the plain values it hands back and takes, shared by the whole host:
schedules, runs and hosts as its rows; changes to jobs; what a run goes through (its claim, log,
end and retries); the summaries it reads for the CLI, the API and the dashboard.

No SQL here: the store imports these, never the other way round.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Self

from jobhost_contracts import UnitCounts
from sqlalchemy.engine import RowMapping

from jobhost.triggers import Schedule

RUNNING = "running"
PENDING = "pending"
SKIPPED = "skipped"
# The order in which pending runs are claimed, lowest first: a person waits on a manual run; a
# backfill yields to everything else.
PRIORITY_MANUAL = 0
PRIORITY_RETRY = 1
PRIORITY_BACKFILL = 2
# A finished run's outcomes, in the order lists, choices and metrics give them.
FINISHED = ("succeeded", "failed", "timed_out", "cancelled", "abandoned", "skipped", "missed")
TERMINAL_OUTCOMES = frozenset(FINISHED)


class _FromRow:
    @classmethod
    def from_row(cls, row: RowMapping | dict[str, Any]) -> Self:
        names = _field_names(cls)  # type: ignore[arg-type]
        return cls(**{k: v for k, v in row.items() if k in names})


@functools.cache  # once per class: reports build tens of thousands of records
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


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


class _Timed:
    __slots__ = ()
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return round((self.finished_at - self.started_at).total_seconds() * 1000)


@dataclass(frozen=True, slots=True)
class RunRecord(_Timed, _FromRow):
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


@dataclass(frozen=True, slots=True)
class LastAttempt(_Timed):
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


@dataclass(frozen=True)
class DesiredSchedule:
    """What the catalog says one job's schedule row should be.

    ``schedule_for(anchor)`` builds the trigger; the anchor matters only to interval jobs.
    """

    job_name: str
    module: str
    trigger_kind: str | None
    trigger_expression: str | None
    timezone: str
    trigger_source: str
    enabled: bool
    schedule_for: Callable[[datetime], Schedule | None] = field(compare=False)
    dst_policy: str | None = None
    """The daylight-saving policy where it is not the default (``dst_gap=skip``): part of the
    catalog's version, so a replica starting with another policy is a new version."""
    declaration: str | None = None
    """The effective declaration as JSON (:func:`jobhost.catalog.stored.declaration_text`):
    what read-only commands show without loading the module. Part of the catalog's version."""
    description: str = ""
    critical: bool = False
    job_source: str = "module"
    """``module`` (declared by a module) or ``runtime`` (created through the API)."""


@dataclass(frozen=True)
class ScheduleChange:
    job_name: str
    before: str
    after: str
    trigger_changed: bool


@dataclass
class SyncPlan:
    """The difference between the catalog and the store."""

    added: list[DesiredSchedule] = field(default_factory=list)
    changed: list[ScheduleChange] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)

    repaired: list[str] = field(default_factory=list)
    """Jobs whose stored next occurrence was one the trigger never produces; recomputed."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.orphaned)


def diff_schedules(rows: Sequence[ScheduleRow], desired: Sequence[DesiredSchedule]) -> SyncPlan:
    """What :func:`sync_schedules` would change, without changing it."""
    plan = SyncPlan()
    stored = {row.job_name: row for row in rows}
    for want in desired:
        row = stored.get(want.job_name)
        if row is None:
            plan.added.append(want)
        elif _differs(row, want):
            plan.changed.append(
                ScheduleChange(
                    want.job_name,
                    before=describe_schedule(row),
                    after=describe_schedule(want),
                    trigger_changed=trigger_changed(row, want),
                )
            )
    names = {want.job_name for want in desired}
    # Runtime jobs' rows (source api) are written and orphaned by their own change path only:
    # a catalog never declared them, so a catalog's sync never orphans them.
    plan.orphaned = sorted(
        r.job_name
        for r in rows
        if r.job_name not in names and not r.orphaned and r.trigger_source != "api"
    )
    return plan


def _differs(row: ScheduleRow, want: DesiredSchedule) -> bool:
    return (
        row.orphaned
        or row.module != want.module
        or row.trigger_source != want.trigger_source
        or row.enabled != want.enabled
        or trigger_changed(row, want)
    )


def trigger_changed(row: ScheduleRow, want: DesiredSchedule) -> bool:
    return (row.trigger_kind, row.trigger_expression, row.timezone) != (
        want.trigger_kind,
        want.trigger_expression,
        want.timezone,
    )


def describe_schedule(schedule: ScheduleRow | DesiredSchedule) -> str:
    """A schedule's trigger as ``plan`` and the sync's report say it."""
    if schedule.trigger_kind == "cron":
        text = f"cron '{schedule.trigger_expression}' {schedule.timezone}"
    elif schedule.trigger_kind == "interval":
        text = f"every {schedule.trigger_expression}"
    else:
        text = "no trigger"
    return text if schedule.enabled else f"{text} (disabled)"


MAX_CHANGE_ID = 2**31 - 1
"""The largest id the change log's column holds (a 32-bit integer on PostgreSQL)."""


@dataclass(frozen=True, slots=True)
class RuntimeJobRow:
    name: str
    kind: str
    definition: dict[str, Any]
    version: int
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str


@dataclass(frozen=True, slots=True)
class JobChange:
    id: int
    at: datetime
    actor: str
    action: str
    job_name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None
    surface: str | None = None
    """``cli``, ``api`` or ``dashboard``; None for the host's own changes and older ones."""
    address: str | None = None
    """The HTTP client's address, as ``trusted_proxies`` decides it; None from the CLI."""


@dataclass(frozen=True, slots=True)
class ChangeSearch:
    """Each field narrows the search when set; ``before_id`` or ``after_id`` is the page's
    cursor."""

    actor: str = ""
    action: str = ""
    job: str | None = None
    module: str = ""
    since: datetime | None = None
    before_id: int | None = None
    after_id: int | None = None


@dataclass(frozen=True, slots=True)
class StateEntry:
    key: str
    value: str
    updated_at: datetime
    fencing_token: int


@dataclass(frozen=True, slots=True)
class LiveRun:
    id: str
    host_id: str | None
    started_at: datetime | None


class StateHeld(Exception):
    """A job's state cannot change now: a run of it is running."""

    def __init__(self, job_name: str, run: LiveRun) -> None:
        super().__init__(job_name, run)
        self.job_name = job_name
        self.run = run


@dataclass(frozen=True, slots=True)
class StateChange:
    """What a change found and did: ``known`` False when the store has no row for the job;
    ``changed`` False when the key already held that value (or, to delete, was absent)."""

    at: datetime
    before: str | None
    after: str | None
    known: bool = True
    changed: bool = True


@dataclass(frozen=True, slots=True)
class BackfillRecord:
    """A backfill as the store holds it, with the count of its items in each state."""

    id: str
    job_name: str
    range_from: datetime
    range_to: datetime
    mode: str
    reason: str | None
    actor: str
    concurrency: int
    state: str
    created_at: datetime
    finished_at: datetime | None
    counts: dict[str, int] = field(default_factory=dict)
    """Occurrence state (pending, claimed, succeeded, failed) → how many; they add up to the
    occurrences it chose."""
    items: tuple[tuple[datetime, str, str | None], ...] = ()
    """Of each occurrence that has a run, oldest first: (occurrence, state, first run id), its
    state by its newest attempt; read only when asked for."""

    @property
    def selected(self) -> int:
        return sum(self.counts.values())

    @property
    def settled(self) -> int:
        return self.counts.get("succeeded", 0) + self.counts.get("failed", 0)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


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


@dataclass
class ClaimBatch:
    """What one call of :func:`~jobhost.store.claims.claim` did."""

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


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a failure was dealt with: ``succeeded`` (``run_id`` is the run that succeeded, ``by``
    who asked for it or, for a scheduled run, its host) or ``acknowledged`` (``by`` the
    operator, ``reason`` why)."""

    how: str
    by: str | None
    at: datetime | None
    run_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Quiet:
    """What a host knows was queued when its last turn read, with nothing announced since (no
    signal, no failed run of its own, no abandon pass): a claim reads pending runs only if a
    manual one was waiting, or once the first one then queued is due."""

    manual_pending: bool
    first_pending: datetime | None

    def pending_due(self, now: datetime) -> bool:
        return self.manual_pending or (self.first_pending is not None and self.first_pending <= now)


def work_key(run: RunRecord) -> str:
    """The run's idempotency key; for a row written without one, the key the claim gives its
    work (so every attempt at one piece of work has the same key)."""
    if run.idempotency_key:
        return run.idempotency_key
    if run.occurrence is not None:
        return occurrence_key(run.job_name, run.occurrence)
    return f"{run.job_name}:manual:{run.id}"


class Failing(NamedTuple):
    streak: int
    """Occurrences in a row that failed, at least 1."""
    critical: bool
    """The store's word (its copy of the declaration)."""


FAILED = ("failed", "timed_out", "abandoned")
"""The outcomes of a finished run that failed."""


STREAK_LIMIT = 100
"""A job's failure streak is counted up to this many attempts."""


@dataclass(frozen=True, slots=True, order=True)
class FailureKey:
    """A place in the list: a finished run's (finished time, run id); pages go to older keys."""

    finished_at: datetime
    run_id: str


@dataclass(frozen=True, slots=True)
class Finish:
    """How a run ended, as the envelope decided it."""

    outcome: str
    finished_at: datetime
    error_type: str | None = None
    error_message: str | None = None
    trace_id: str | None = None
    result: str | None = None
    """The executor's ``Success`` value as bounded JSON text (jobhost/envelope/envelope.py)."""


@dataclass(frozen=True, slots=True)
class RetryRequest:
    """The next attempt of a run that failed: any replica takes it once ``not_before`` passes."""

    run_id: str
    job_name: str
    occurrence: datetime | None
    attempt: int
    source: str
    idempotency_key: str | None
    requested_by: str | None
    reason: str | None
    not_before: datetime
    backfill_id: str | None = None
    attempt_base: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """One finished run to record: what ended, and the retry its policy asks for, if any."""

    run_id: str
    job_name: str
    started_at: datetime | None
    end: Finish
    retry: RetryRequest | None = None
    units: UnitCounts | None = None
    awaited: bool = False
    """Someone waits for this run's outcome (a manual request's): signal once it is recorded."""
    backfill_id: str | None = None
    """The backfill the run replays ``occurrence`` for: its item settles with this write."""
    occurrence: datetime | None = None


RetriesFor = Callable[[list[RunRecord], datetime], Sequence[RetryRequest]]
"""Given runs just recorded ``abandoned`` and the instant, the retries to queue for them."""


@dataclass(frozen=True)
class FailureFilter:
    since: datetime | None = None
    jobs: Collection[str] | None = None
    """Only these jobs' failures (None: every job's)."""
    text: str | None = None


@dataclass(frozen=True, slots=True)
class StreakRange:
    first: datetime
    """The streak's oldest failed occurrence: where the replay starts."""
    last: datetime
    """Its newest."""
    failed: int
    """Occurrences from ``first`` to ``last`` whose last attempt failed."""

    @property
    def end(self) -> datetime:
        """The range's end, which a backfill excludes: the newest failure plus the smallest
        step a stored time takes, so no later occurrence is in it."""
        return self.last + timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One kept line: its number in the run's output (from 1), where it stood, what it said."""

    run_id: str
    seq: int
    at_us: int
    """When it was written: microseconds since the Unix epoch, UTC."""
    level: str
    message: str
    offset: int
    """Bytes the run wrote before this line."""
    size: int
    """Bytes of this line as the job wrote it (before it was cut)."""

    @property
    def at(self) -> datetime:
        return _EPOCH + timedelta(microseconds=self.at_us)


@dataclass(frozen=True, slots=True)
class Dropped:
    """Lines the bounds left out between two kept lines."""

    lines: int
    bytes: int


class Chunk(tuple[str, int, int, int, str]):
    """Consecutive lines of one run as one row: ``(run_id, seq, lines, offset, body)``, made by
    :func:`chunk`."""

    __slots__ = ()


def chunk(run_id: str, seq: int, offset: int, lines: Sequence[tuple[int, str, int, str]]) -> Chunk:
    """A row of ``lines`` (each ``(at_us, level, size, message)``), the first numbered ``seq``
    and standing at byte ``offset`` of the run's output."""
    body = json.dumps(lines, ensure_ascii=False, separators=(",", ":"))
    return Chunk((run_id, seq, len(lines), offset, body))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LogWrites:
    """Rows of run-log lines to write: ``trims`` first (``(run_id, above, below)``: the stored
    rows between two line numbers a later tail pushed out, see
    :func:`~jobhost.store.ledger.trim_lines`), then ``chunks``."""

    trims: Sequence[tuple[str, int, int]] = ()
    chunks: Sequence[Chunk] = ()


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
