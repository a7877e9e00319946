"""What a run goes through: the claim that starts it (with the plan it keeps for each schedule,
and backfills), the log it writes, how it ends and what follows (retries, failure streaks)."""

from __future__ import annotations

import functools
import json
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from jobhost_contracts import UnitCounts

from jobhost.records.rows import RunRecord


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
