"""Claiming work: the one path by which every run starts.

:func:`claim` takes, in one transaction, pending runs (manual first: a person is waiting; then
due retries), then due schedules oldest first, and last, in the workers still free, running
backfills' occurrences: scheduled work first, a backfill yields. It locks what it reads, asks
:class:`ClaimRules` and the :class:`GroupGate`, and writes the whole batch in a handful of
statements, each job's fencing token advanced exactly once per run it starts. The run row's
unique constraint on (job, occurrence, attempt) stays the last word: an insert it refuses is
dropped from the batch, never run twice.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import (
    PENDING,
    PRIORITY_BACKFILL,
    PRIORITY_MANUAL,
    PRIORITY_RETRY,
    RUNNING,
    SKIPPED,
    Claim,
    ClaimBatch,
    DesiredSchedule,
    DueSchedule,
    GroupSummary,
    HostRecord,
    PlannedRow,
    Quiet,
    RunRecord,
    SchedulePlan,
    ScheduleRecord,
    SyncPlan,
    new_run_id,
    occurrence_key,
)
from jobhost.store.backfills import finish_backfills
from jobhost.store.engine import (
    BatchValue,
    Database,
    built,
    database,
    database_now,
    execute_batch,
    insert_returning_new,
    locked,
    reading,
)
from jobhost.store.ledger import (
    group_summaries,
    hosts_at,
    write_group_limits,
    write_group_members,
)
from jobhost.store.registry import sync_schedules
from jobhost.store.reports import get_schedule
from jobhost.store.schema import (
    IS_PENDING,
    IS_RUNNING,
    backfills,
    concurrency_groups,
    hosts,
    runs,
    schedules,
)
from jobhost.store.signals import notify

__all__ = [
    "RECHECK",
    "Before",
    "ClaimRules",
    "GroupGate",
    "Wakeups",
    "before_trigger",
    "claim",
    "due_jobs",
    "look_ahead",
    "next_wakeups",
    "sync_catalog",
]


def sync_catalog(
    engine: Engine,
    desired: Sequence[DesiredSchedule],
    now: datetime,
    *,
    catalog_version: str | None = None,
    limits: Mapping[str, int],
    members: Mapping[str, str | None],
    host_id: str | None = None,
) -> SyncPlan:
    """Write the catalog's schedules and concurrency groups (the newest start wins); with
    ``host_id``, that host's row says it wrote ``catalog_version`` at ``now``."""
    with engine.begin() as connection:
        plan = sync_schedules(connection, desired, now, catalog_version=catalog_version)
        write_group_limits(connection, limits, now)
        write_group_members(connection, members)
        if host_id is not None:
            connection.execute(
                update(hosts)
                .where(hosts.c.id == host_id)
                .values(synced_at=now, catalog_version=catalog_version)
            )
        return plan


def claim(
    engine: Engine,
    *,
    host_id: str,
    rules: ClaimRules,
    clock: Clock,
    slots: int = 1,
    now: datetime | None = None,
    manual_slots: int = 0,
    skip: Collection[str] = (),
    quiet: Quiet | None = None,
    early: timedelta = timedelta(0),
    backfill_slots: int = 0,
    job: str | None = None,
    run_id: str | None = None,
    backfill_id: str | None = None,
) -> Turn:
    """Claim up to ``slots`` runs (plus ``manual_slots`` for manual runs only; at most
    ``backfill_slots`` backfilled, in the slots the rest left), then read when the store next
    needs this host. ``now`` None reads the store's time in this transaction; ``quiet`` skips the
    pending read it rules out; ``early`` also takes occurrences due up to that far ahead that
    would run as they stand. ``job``, ``run_id`` or ``backfill_id`` narrow the claim (the
    one-job fallback, a command running its manual run or its backfill itself, which the claim
    finishes when nothing of it is left)."""
    with engine.begin() as connection:
        at = now or database_now(connection, clock)
        read_at = time.monotonic()
        batch = ClaimBatch()
        skipped = list(skip)
        only = None if job is None else [job]
        if backfill_id is not None:
            _claim_backfills(
                connection,
                batch,
                host_id=host_id,
                now=at,
                slots=slots,
                rules=rules,
                only=backfill_id,
            )
        else:
            work = _ClaimWork(connection, host_id=host_id, now=at, rules=rules, batch=batch)
            if job is None and (run_id is not None or quiet is None or quiet.pending_due(at)):
                waiting = _due_pending(
                    connection, at, slots + manual_slots, skip=skipped, run_id=run_id
                )
                waiting = _known(waiting, rules, batch)
                work.lock_rows({r.job_name for r in waiting})
                for run in waiting:
                    if work.taken < slots + (
                        manual_slots if run.priority == PRIORITY_MANUAL else 0
                    ):
                        work.start_pending(run)
            if run_id is None and work.taken < slots:
                rows = _due_schedules(
                    connection, at + early, slots - work.taken, skip=skipped, only=only
                )
                batch.schedules_seen = len(rows)
                rows = _known(rows, rules, batch)
                work.adopt(rows)
                for row in rows:
                    if work.taken >= slots:
                        break
                    if row.due_at is not None and row.due_at > at:
                        work.fire_early(row)
                    else:
                        work.fire(row)
            work.write()
            room = min(backfill_slots, slots - work.taken)
            if run_id is None and job is None and room > 0:
                # After the write: a job's fencing token is read as this batch left it.
                _claim_backfills(
                    connection,
                    batch,
                    host_id=host_id,
                    now=at,
                    slots=room,
                    rules=rules,
                    skip=skipped,
                )
        wakeups = next_wakeups(connection, skip=sorted(set(skip) | batch.unknown))
    return Turn(batch, wakeups, at, read_at)


@dataclass(frozen=True)
class Turn:
    """What one :func:`claim` did and read."""

    batch: ClaimBatch
    wakeups: Wakeups
    now: datetime
    read_at: float
    """When (monotonic) ``now`` was read: a sleep until a time is measured from it."""


@dataclass(frozen=True)
class Before:
    """One job as the command queueing a manual run (or a retry of one run) finds it."""

    now: datetime
    row: ScheduleRecord | None
    running: list[RunRecord]
    hosts: list[HostRecord]
    groups: list[GroupSummary]


def before_trigger(connection: Connection, job: str, now: datetime) -> Before:
    return Before(
        now,
        get_schedule(connection, job),
        _live_runs(connection, job, now),
        hosts_at(connection, now),
        group_summaries(connection, now),
    )


def due_jobs(engine: Engine, now: datetime, limit: int) -> list[str]:
    """Jobs whose schedule row is due at ``now``, oldest first (read without locking)."""
    query = (
        select(schedules.c.job_name)
        .where(schedules.c.due_at <= now)
        .order_by(schedules.c.due_at)
        .limit(limit)
    )
    with reading(engine) as connection:
        return list(connection.execute(query).scalars())


def look_ahead(
    engine: Engine, now: datetime | None, clock: Clock, *, skip: Sequence[str] = ()
) -> tuple[Wakeups, datetime]:
    """When the store next needs this host (see :func:`next_wakeups`), and the instant it
    looked from (with ``now`` None, the store's, read in the same read)."""
    with reading(engine) as connection:
        at = now or database_now(connection, clock)
        return next_wakeups(connection, skip=skip), at


# A lease that expired but whose host may still be alive is looked at again this often.
_EXPIRED_LEASE_RECHECK = timedelta(seconds=1)
# With work still due but nothing claimable (rows another replica holds), look again soon.
_BUSY_RECHECK = timedelta(milliseconds=20)


@dataclass(frozen=True, slots=True)
class Wakeups:
    """When the store next needs a host: the earliest due schedule, due retry, lease expiry,
    manual run no claim has looked at, and running backfill (None: no backfill read)."""

    due_at: datetime | None = None
    retry_at: datetime | None = None
    lease_expiry: datetime | None = None
    request_at: datetime | None = None
    backfill_at: datetime | None = None

    def lease_expiry_passed(self, now: datetime) -> bool:
        return self.lease_expiry is not None and self.lease_expiry < now

    def lag(self, now: datetime) -> float:
        """Seconds the oldest due schedule has waited; 0 when nothing is due."""
        if self.due_at is None or self.due_at > now:
            return 0.0
        return (now - self.due_at).total_seconds()

    def next_wake(
        self, now: datetime, *, more_due: bool = False, early: timedelta = timedelta(0)
    ) -> datetime | None:
        """When to look again after a turn at ``now`` whose claim also looked ``early`` ahead
        (see :func:`claim`)."""
        times: list[datetime] = []
        if self.due_at is not None:
            # Woken ``early`` before a future occurrence; one already due that the claim left
            # (rows another replica holds) is looked at again soon, not in a spin.
            busy = not more_due and self.due_at <= now
            if busy:
                times.append(now + _BUSY_RECHECK)
            elif self.due_at > now + early:
                times.append(self.due_at - early)
            else:
                times.append(self.due_at)
        if self.retry_at is not None:
            times.append(max(self.retry_at, now + _BUSY_RECHECK))
        if self.lease_expiry is not None:
            times.append(max(self.lease_expiry, now + _EXPIRED_LEASE_RECHECK))
        if self.request_at is not None:
            times.append(now + _BUSY_RECHECK)
        return min(times) if times else None


def next_wakeups(connection: Connection, *, skip: Sequence[str] = ()) -> Wakeups:
    """The :class:`Wakeups` but for ``skip``'s jobs, in one indexed statement."""
    row = connection.execute(built(connection, "wakeups", _wakeups_query), {"skip": list(skip)})
    return Wakeups(*(value if isinstance(value, datetime) else None for value in row.one()))


class ClaimRules(Protocol):
    """The firing policy, as :func:`claim` asks for it; no SQL on this side."""

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


def _schedule_problem(row: PlannedRow) -> str | None:
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


_Row = TypeVar("_Row", RunRecord, DueSchedule)


def _known(found: list[_Row], rules: ClaimRules, batch: ClaimBatch) -> list[_Row]:
    """The rows of jobs this host knows; the others' jobs are noted in ``batch.unknown``."""
    batch.unknown |= {r.job_name for r in found if not rules.knows(r.job_name)}
    return [r for r in found if rules.knows(r.job_name)]


_RUN_COLUMNS = ("job_name", "occurrence", "attempt")
_STARTED = ("host_id", "fencing_token", "started_at", "lease_expires_at", "reason")
_REFUSED = ("reason", "host_id", "finished_at")


@dataclass
class _Job:
    """One job's schedule row as the batch changes it."""

    row: PlannedRow
    token: int
    lease_live: bool
    live_runs: int = 0
    started: list[Claim] = field(default_factory=list)
    plan: SchedulePlan | None = None


class _ClaimWork:
    """One claim's decisions, row by row, written together by :meth:`write`."""

    def __init__(
        self,
        connection: Connection,
        *,
        host_id: str,
        now: datetime,
        rules: ClaimRules,
        batch: ClaimBatch,
    ) -> None:
        self._connection = connection
        self._host = host_id
        self._now = now
        self._rules = rules
        self._batch = batch
        self._jobs: dict[str, _Job] = {}
        self._runs: list[dict[str, Any]] = []
        self._pending: list[Claim] = []
        self._refused: list[dict[str, Any]] = []
        self._not_run: list[tuple[str, datetime, str, str]] = []
        self._announce = False
        self._claims: dict[str, Claim] = {}
        self._groups = GroupGate(connection, now)
        self.taken = 0

    def lock_rows(self, names: set[str]) -> None:
        if not names:
            return
        query = locked(
            self._connection, select(*_DUE_COLUMNS).where(schedules.c.job_name.in_(sorted(names)))
        )
        self.adopt([DueSchedule._make(r) for r in self._connection.execute(query)])

    def adopt(self, rows: Sequence[PlannedRow]) -> None:
        """Take rows read under lock into the batch, with their live-run counts."""
        fresh = [r for r in rows if r.job_name not in self._jobs]
        for row in fresh:
            name = row.job_name
            problem = _schedule_problem(row)
            if problem is not None:
                self._batch.corrupt[name] = problem
                continue
            live = (
                row.lease_owner is not None
                and row.lease_expires_at is not None
                # A lease further out than any renewal could set is corrupt: not live.
                and self._now <= row.lease_expires_at <= self._now + 4 * self._rules.lease(name)
            )
            self._jobs[name] = _Job(row, row.fencing_token, live)
        counted = [r.job_name for r in fresh if self._rules.counts_live_runs(r.job_name)]
        if counted:
            query = (
                select(runs.c.job_name, func.count())
                .where(runs.c.job_name.in_(counted), _own_live(self._now))
                .group_by(runs.c.job_name)
            )
            for name, count in self._connection.execute(query):
                if name in self._jobs:
                    self._jobs[name].live_runs = int(count)

    def start_pending(self, run: RunRecord) -> None:
        """Start a manual run or a retry. A manual run nobody has looked at yet is refused when
        its job cannot start now; any other waits, pending, for its job or its group."""
        name = run.job_name
        fresh = run.priority == PRIORITY_MANUAL and run.not_before is None
        job = self._jobs.get(name)
        if job is None:
            if fresh:
                self._refuse(run, f"job {name!r} has no schedule in the store yet")
            return
        if not self._may_start(job):
            if fresh:
                self._refuse(run, self._overlap_message(name))
            else:
                self._batch.waiting.add(name)
            return
        beside = self._groups.beside(job.row) if run.beside_limit else None
        if not run.beside_limit and not self._groups.admit(job.row, queue_order=False):
            self._groups.park_run(run, job.row.concurrency_group)
            self._announce |= fresh
            return
        self._groups.started_run(run)
        self._start_pending(job, run, "; ".join(r for r in (run.reason, beside) if r) or None)
        self._announce |= run.source == "manual"

    def start_backfill(
        self, row: ScheduleRecord, live: int, backfill_id: str, limit: int, *, retries: bool
    ) -> bool:
        """Start up to ``limit`` of the backfill's waiting occurrences (``retries``: its due
        retries), oldest first; False when one was left for the job's own runs or its group."""
        job = self._jobs.setdefault(
            row.job_name, _Job(row, row.fencing_token, row.lease_live(self._now), live)
        )
        name = "backfill-retries" if retries else "backfill-waiting"
        query = built(self._connection, name, lambda d: _backfill_runs_query(d, retries=retries))
        values = {"backfill": backfill_id, "now": self._now, "limit": limit}
        for found in self._connection.execute(query, values).mappings().all():
            # Behind every occurrence of the group that waits: a backfill never makes one late.
            if not self._may_start(job) or not self._groups.admit(job.row, queue_order=True):
                return False
            run = RunRecord.from_row(found)
            self._start_pending(job, run, run.reason)
        return True

    def fire(self, row: PlannedRow) -> None:
        job = self._jobs.get(row.job_name)
        if job is None:
            return
        blocked = not self._may_start(job)
        plan = self._rules.plan(job.row, self._now, blocked=blocked)
        if plan is None:
            return
        if plan.run is not None and not self._groups.admit(job.row, queue_order=True):
            self._groups.park_row(job.row)  # the occurrence waits for its group: nothing recorded
            return
        self._groups.settled_row(job.row)
        backlog = plan.next_occurrence is not None and plan.next_occurrence <= self._now
        if blocked and plan.run is None and backlog:
            self._batch.waiting.add(row.job_name)  # the live run's record makes it due
        job.plan = plan
        self._not_run += [(row.job_name, *not_run) for not_run in plan.not_run]
        if plan.run is not None:
            self._start_new(job, plan.run, plan.source, self._now)

    def fire_early(self, row: PlannedRow) -> None:
        """Claim the occurrence the row is due at (after now), to start then; a job busy now, in
        a group or with occurrences to record is left to the claim at its instant."""
        job = self._jobs.get(row.job_name)
        at = row.due_at
        if at is None or job is None or job.row.concurrency_group is not None:
            return
        if not self._may_start(job):
            return
        plan = self._rules.plan(job.row, at, blocked=False)
        if plan is None or plan.run != at or plan.not_run:
            return
        job.plan = plan
        self._start_new(job, at, plan.source, at)

    def write(self) -> None:
        connection = self._connection
        self._groups.write()
        self._batch.group_waits.update(self._groups.waits)
        inserted = set(insert_returning_new(connection, runs, self._runs, _RUN_COLUMNS))
        if self._pending:
            started = [
                {
                    "b_id": c.run_id,
                    "host_id": self._host,
                    "fencing_token": c.fencing_token,
                    "started_at": self._now,
                    "lease_expires_at": c.lease_until,
                    "reason": c.reason,
                }
                for c in self._pending
            ]
            start = built(connection, "start-pending", _update_pending(_STARTED, outcome=RUNNING))
            connection.execute(start, started)
            inserted |= {c.run_id for c in self._pending}
        if self._refused:
            # Manual runs that cannot start are recorded skipped, with why as their reason.
            refuse = built(connection, "refuse-pending", _update_pending(_REFUSED, outcome=SKIPPED))
            connection.execute(refuse, self._refused)
        if self._announce:
            # Whoever waits for a manual run's answer (the API, `jobhost trigger`) is woken.
            notify(connection)
        self._write_schedules(inserted)
        self._batch.claims += [c for run_id, c in self._claims.items() if run_id in inserted]
        recorded = insert_returning_new(
            connection,
            runs,
            [
                {
                    "id": new_run_id(),
                    "job_name": name,
                    "occurrence": occurrence,
                    "attempt": 0,
                    "source": "schedule",
                    "outcome": outcome,
                    "reason": reason,
                    "host_id": self._host,
                    "queued_at": self._now,
                    "finished_at": self._now,
                }
                for name, occurrence, outcome, reason in self._not_run
            ],
            _RUN_COLUMNS,
        )
        # Another writer may have recorded some first; report only what this batch wrote.
        self._batch.not_run += self._not_run[: len(recorded)]

    def _write_schedules(self, inserted: set[str]) -> None:
        leased: list[dict[str, Any]] = []
        advanced: list[dict[str, Any]] = []
        tokens: list[dict[str, Any]] = []
        for name, job in self._jobs.items():
            started = [c for c in job.started if c.run_id in inserted]
            taken = [c for c in started if c.backfill_id is None]
            if started and not taken:
                tokens.append({"b_job": name, "fencing_token": job.token})
            if job.plan is None and not taken:
                continue
            moved = job.plan if job.plan is not None else job.row
            values: dict[str, Any] = {
                "b_job": name,
                "next_occurrence": moved.next_occurrence,
                "due_at": moved.due_at,
                "missed_through": moved.missed_through,
            }
            if taken:
                # The newest run holds the lease; the token is the highest handed out, so it
                # only grows even when an insert in the middle of the batch was refused.
                values |= {
                    "fencing_token": job.token,
                    "lease_owner": self._host,
                    "lease_expires_at": taken[-1].lease_until,
                    "lease_run_id": taken[-1].run_id,
                }
                leased.append(values)
            else:
                advanced.append(values)
        # Rows moved on with no run of theirs started; rows moved on that lease their newest
        # run; rows whose token moves past a backfill's runs, which hold no lease.
        _move_schedules(self._connection, "advance-schedules", _MOVED, advanced)
        _move_schedules(self._connection, "lease-schedules", _LEASED, leased)
        _move_schedules(self._connection, "advance-tokens", ("fencing_token",), tokens)

    def _may_start(self, job: _Job) -> bool:
        return self._rules.may_start(job.row.job_name, job.live_runs, job.lease_live)

    def _start_pending(self, job: _Job, run: RunRecord, reason: str | None) -> None:
        claim = Claim(
            run_id=run.id,
            job_name=run.job_name,
            occurrence=run.occurrence,
            attempt=run.attempt,
            source=run.source,
            fencing_token=0,
            idempotency_key=run.idempotency_key or f"{run.job_name}:{run.id}",
            started_at=self._now,
            requested_by=run.requested_by,
            reason=reason,
            backfill_id=run.backfill_id,
            attempt_base=run.attempt_base,
        )
        self._pending.append(self._start(job, claim))

    def _start_new(
        self, job: _Job, occurrence: datetime, source: str, started_at: datetime
    ) -> None:
        """Start ``occurrence``'s first attempt: a new run row, inserted by :meth:`write`."""
        name = job.row.job_name
        key = occurrence_key(name, occurrence)
        claim = self._start(
            job, Claim(new_run_id(), name, occurrence, 1, source, 0, key, started_at)
        )
        self._runs.append(
            {
                "id": claim.run_id,
                "job_name": name,
                "occurrence": occurrence,
                "attempt": 1,
                "source": source,
                "outcome": RUNNING,
                "host_id": self._host,
                "fencing_token": claim.fencing_token,
                "idempotency_key": key,
                "queued_at": self._now,
                "started_at": started_at,
                "lease_expires_at": claim.lease_until,
            }
        )

    def _start(self, job: _Job, claim: Claim) -> Claim:
        name = job.row.job_name
        job.token += 1
        if claim.backfill_id is None:
            # A backfill's run yields to the schedule: it neither holds the job's lease nor
            # counts against its overlap rule; its backfill's concurrency bounds it.
            job.live_runs += 1
            job.lease_live = True
        claim = replace(
            claim,
            fencing_token=job.token,
            lease_until=self._now + self._rules.lease(name),
            record_by=_record_by(job, claim.occurrence),
        )
        job.started.append(claim)
        self._claims[claim.run_id] = claim
        self.taken += 1
        return claim

    def _refuse(self, run: RunRecord, message: str) -> None:
        self._batch.refused.append((run.id, message))
        self._announce = True
        self._refused.append(
            {
                "b_id": run.id,
                "reason": message + (f"; asked: {run.reason}" if run.reason else ""),
                "host_id": self._host,
                "finished_at": self._now,
            }
        )

    def _overlap_message(self, job_name: str) -> str:
        running = _live_runs(self._connection, job_name, self._now)
        if not running:
            return "refused: a run of this job is still running (overlap policy forbid)"
        first = running[0]
        started = first.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") if first.started_at else "?"
        return (
            f"refused: run {first.id} is still running on host {first.host_id} since {started} "
            "(overlap policy forbid)"
        )


def _record_by(job: _Job, occurrence: datetime | None) -> datetime | None:
    """See :attr:`Claim.record_by`; None for any other run or a job in a concurrency group."""
    plan = job.plan
    grouped = job.row.concurrency_group is not None
    if grouped or occurrence is None or plan is None or plan.run != occurrence:
        return None
    return min((at for at in (plan.next_occurrence, plan.due_at) if at is not None), default=None)


# -- concurrency groups in the claim --------------------------------------------------------------

# How soon something waiting for a slot is looked at again; a waiting row not looked at for
# ``_STALE`` (its job known to no live host) no longer holds its place in the queue.
RECHECK = timedelta(seconds=1)
_STALE = timedelta(seconds=5)


@dataclass
class _Group:
    slots: int
    running: int
    waiting: list[tuple[datetime, str]] = field(default_factory=list)
    """(occurrence, job) of the oldest waiting schedule rows, oldest first."""

    def ahead_of(self, job_name: str, occurrence: datetime) -> int:
        return sum(1 for when, name in self.waiting if (when, name) < (occurrence, job_name))


class GroupGate:
    """The slots of every concurrency group (held by live runs), counted under a lock on the
    groups' rows so two replicas never both take the last slot. What finds its group full waits
    :data:`RECHECK`: a due schedule row keeps its occurrence, a retry or a queued manual run stays
    pending with ``not_before`` moved on. A free slot goes to the oldest waiting occurrence
    first, so no job of a busy group starves."""

    def __init__(self, connection: Connection, now: datetime) -> None:
        self._connection = connection
        self._now = now
        self._limits: dict[str, int] | None = None
        self._groups: dict[str, _Group] = {}
        self._parked_rows: dict[str, datetime] = {}
        self._cleared_rows: list[str] = []
        self._parked_runs: list[dict[str, Any]] = []
        self._cleared_runs: list[str] = []
        self.waits: Counter[str] = Counter()  # group → waits begun in this claim

    def admit(self, row: PlannedRow, *, queue_order: bool) -> bool:
        """Take a slot of the job's group; False when full. ``queue_order``: behind older
        waiting occurrences (retries and manual runs take any free slot)."""
        group = self._group(row.concurrency_group)
        if group is None:
            return True
        ahead = 0
        if queue_order and row.next_occurrence is not None:
            ahead = group.ahead_of(row.job_name, row.next_occurrence)
        if group.slots - group.running - ahead <= 0:
            return False
        group.running += 1
        group.waiting = [w for w in group.waiting if w[1] != row.job_name]
        return True

    def beside(self, row: PlannedRow) -> str | None:
        """Take a slot even in a full group (``trigger --now``); the note the run records."""
        group = self._group(row.concurrency_group)
        if group is None:
            return None
        full = group.running >= group.slots
        note = (
            f"--now: started beside the limit of group {row.concurrency_group} "
            f"({group.running} of {group.slots} busy)"
        )
        group.running += 1
        return note if full else None

    def park_row(self, row: PlannedRow) -> None:
        """The row's occurrence waits: look at it again after :data:`RECHECK`."""
        if row.group_waiting_since is None:
            self.waits[row.concurrency_group or ""] += 1
        self._parked_rows[row.job_name] = row.group_waiting_since or self._now

    def settled_row(self, row: PlannedRow) -> None:
        """The row was acted on (run, recorded or moved on): it no longer waits."""
        if row.group_waiting_since is not None and row.job_name not in self._parked_rows:
            self._cleared_rows.append(row.job_name)

    def park_run(self, run: RunRecord, group: str | None) -> None:
        """A pending run waits for its group: claimable again after :data:`RECHECK`."""
        if run.group_waiting_since is None:
            self.waits[group or ""] += 1
        self._parked_runs.append(
            {
                "b_id": run.id,
                "not_before": self._now + RECHECK,
                "group_waiting_since": run.group_waiting_since or self._now,
            }
        )

    def started_run(self, run: RunRecord) -> None:
        if run.group_waiting_since is not None:
            self._cleared_runs.append(run.id)

    def write(self) -> None:
        """What the gate decided, in a statement per kind of change (none without groups)."""
        connection = self._connection
        parked = [
            {"b_job": name, "due_at": self._now + RECHECK, "group_waiting_since": since}
            for name, since in self._parked_rows.items()
        ]
        _move_schedules(connection, "park-schedules", ("due_at", "group_waiting_since"), parked)
        if self._parked_runs:
            park = _update_pending(("not_before", "group_waiting_since"))
            connection.execute(built(connection, "park-runs", park), self._parked_runs)
        for key, cleared in (
            (schedules.c.job_name, self._cleared_rows),
            (runs.c.id, self._cleared_runs),
        ):
            if cleared:
                statement = update(key.table).where(key.in_(cleared))
                connection.execute(statement.values(group_waiting_since=None))

    def _group(self, name: str | None) -> _Group | None:
        if name is None:
            return None
        group = self._groups.get(name)
        if group is not None:
            return group
        limits = self._lock_limits()
        if name not in limits:
            return None  # no limit stored (a catalog older than the group): not limited
        group = self._groups[name] = _Group(
            slots=limits[name], running=self._running(name), waiting=self._waiting(name)
        )
        return group

    def _lock_limits(self) -> dict[str, int]:
        if self._limits is None:
            query = select(concurrency_groups.c.name, concurrency_groups.c.slots).order_by(
                concurrency_groups.c.name
            )
            # Every group row, in name order, once per claim: waits never form a circle.
            query = database(self._connection).locked(query)
            self._limits = {str(n): int(s) for n, s in self._connection.execute(query)}
        return self._limits

    def _running(self, name: str) -> int:
        query = (
            select(func.count())
            .select_from(runs.join(schedules, runs.c.job_name == schedules.c.job_name))
            .where(
                schedules.c.concurrency_group == name,
                runs.c.outcome == RUNNING,
                runs.c.lease_expires_at >= self._now,
            )
        )
        return int(self._connection.execute(query).scalar_one())

    def _waiting(self, name: str) -> list[tuple[datetime, str]]:
        limit = self._limits[name] if self._limits else 1
        query = (
            select(schedules.c.next_occurrence, schedules.c.job_name)
            .where(
                schedules.c.concurrency_group == name,
                schedules.c.group_waiting_since.is_not(None),
                schedules.c.next_occurrence.is_not(None),
                schedules.c.due_at >= self._now - _STALE,
            )
            .order_by(schedules.c.next_occurrence, schedules.c.job_name)
            .limit(limit)
        )
        return [(when, str(job)) for when, job in self._connection.execute(query)]


# -- a backfill's occurrences, the last step of the claim ------------------------------------------


def _claim_backfills(
    connection: Connection,
    batch: ClaimBatch,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    skip: Collection[str] = (),
    only: str | None = None,
) -> None:
    """Claim up to ``slots`` runs of running backfills (``only``: that one, with its due retries,
    which a command running it has no host to take). A backfill yields to the schedule: it starts
    a run only when the job's overlap policy allows one beside the job's own live runs, and up
    to its ``concurrency`` beside each other; its runs never take the job's lease, so the overlap
    rule of the scheduled occurrences never counts them. Its schedule row is locked with it, so
    one replica at a time counts a backfill's runs; a paused job's backfill waits."""
    if only is not None:
        finish_backfills(connection, now, [only])
    if slots <= 0:
        return
    one = only is not None
    query = built(
        connection, "one-backfill" if one else "open-backfills", lambda d: _backfills_query(d, one)
    )
    work = _ClaimWork(connection, host_id=host_id, now=now, rules=rules, batch=batch)
    idle: list[str] = []
    for backfill in connection.execute(query, {"now": now, "only": only}).mappings().all():
        if work.taken >= slots:
            batch.backfill_more = True
            break
        name = str(backfill["job_name"])
        if name in skip or not rules.knows(name):
            continue
        row = ScheduleRecord.from_row(backfill)
        if _schedule_problem(row) is not None:
            continue  # a corrupt row is reported by the claim
        backfill_id, live = str(backfill["backfill_id"]), int(backfill["live"])
        in_flight, started = int(backfill["in_flight"]), work.taken
        # Its retries hold their occurrences' slots: they go first.
        left = slots - work.taken
        yielded = one and not work.start_backfill(row, live, backfill_id, left, retries=True)
        room = min(int(backfill["backfill_concurrency"]) - in_flight, slots - work.taken)
        if room > 0:
            yielded |= not work.start_backfill(row, live, backfill_id, room, retries=False)
        if not (work.taken > started or yielded or in_flight):
            idle.append(backfill_id)
        if yielded:
            batch.backfill_yielded.add(name)
    work.write()
    if idle:
        # Its runs end with a write that finishes it; one whose last run left otherwise (by
        # retention, say) is finished here, or every turn would look at it again.
        finish_backfills(connection, now, idle)
    batch.backfill_more |= work.taken >= slots


# The statements of the claim, each built once whatever the batch size. What a claim takes is
# locked as read (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so replicas divide the work).

_DUE_COLUMNS = tuple(schedules.c[name] for name in DueSchedule._fields)


def _live_runs(connection: Connection, job_name: str, now: datetime) -> list[RunRecord]:
    query = select(runs).where(runs.c.job_name == job_name, _own_live(now))
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def _own_live(now: Any) -> Any:
    """A job's own live runs (a backfill's runs are not counted by the overlap rule)."""
    return and_(
        runs.c.outcome == RUNNING, runs.c.lease_expires_at >= now, runs.c.backfill_id.is_(None)
    )


def _due_pending(
    connection: Connection, now: datetime, limit: int, *, skip: list[str], run_id: str | None
) -> list[RunRecord]:
    """Due pending runs in claim order; with ``run_id``, that one whenever it is due."""
    if limit <= 0:
        return []
    if run_id is not None:
        one = locked(connection, select(runs).where(runs.c.id == run_id, runs.c.outcome == PENDING))
        rows = connection.execute(one).mappings()
    else:
        query = built(connection, "due-pending", _due_pending_query)
        rows = connection.execute(query, {"now": now, "skip": skip, "limit": limit}).mappings()
    return [RunRecord.from_row(r) for r in rows]


def _due_schedules(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    only: Collection[str] | None,
) -> list[DueSchedule]:
    """Due schedule rows, oldest first, of the jobs not in ``skip`` (with ``only``: of those)."""
    of = only is not None
    query = built(connection, f"due-schedules:{of}", lambda d: _due_schedules_query(d, of))
    names = sorted(only) if only is not None else skip
    result = connection.execute(query, {"now": now, "names": names, "limit": limit})
    return [DueSchedule._make(r) for r in result]


_MOVED = ("next_occurrence", "due_at", "missed_through")
_LEASED = (*_MOVED, "fencing_token", "lease_owner", "lease_expires_at", "lease_run_id")


def _move_schedules(
    connection: Connection, name: str, columns: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """Write ``columns`` of each job's schedule row (``b_job``), in one statement on PostgreSQL."""

    def build(value: BatchValue) -> Any:
        job = value("b_job", schedules.c.job_name.type)
        values = {c: value(c, schedules.c[c].type) for c in columns}
        return update(schedules).where(schedules.c.job_name == job).values(**values)

    execute_batch(connection, name, build, rows, isolate=False)


def _due_pending_query(db: Database) -> Any:
    query = select(runs).where(
        IS_PENDING,
        # A backfill's waiting occurrences are claimed by the backfill claim, after.
        runs.c.priority < PRIORITY_BACKFILL,
        or_(
            runs.c.not_before.is_(None),
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
        ),
        runs.c.job_name.not_in(bindparam("skip", expanding=True)),
    )
    return _claimable(db, query, runs.c.priority, runs.c.not_before.nulls_first())


def _due_schedules_query(db: Database, of: bool) -> Any:
    names: Any = bindparam("names", expanding=True)
    query = select(*_DUE_COLUMNS).where(
        schedules.c.due_at <= bindparam("now", type_=schedules.c.due_at.type),
        schedules.c.job_name.in_(names) if of else schedules.c.job_name.not_in(names),
    )
    return _claimable(db, query, schedules.c.due_at)


def _backfills_query(db: Database, one: bool) -> Any:
    """Running backfills of jobs not paused, oldest first, with their schedule rows and counts,
    locked together; with ``one``, the backfill ``only`` even when full."""
    in_flight = (
        select(func.count())
        .where(
            runs.c.backfill_id == backfills.c.id,
            or_(
                runs.c.outcome == RUNNING,
                and_(runs.c.outcome == PENDING, runs.c.priority == PRIORITY_RETRY),
            ),
        )
        .scalar_subquery()
    )
    now = bindparam("now", type_=runs.c.lease_expires_at.type)
    live = (
        select(func.count())
        .where(runs.c.job_name == backfills.c.job_name, _own_live(now))
        .scalar_subquery()
    )
    query = (
        select(
            backfills.c.id.label("backfill_id"),
            backfills.c.concurrency.label("backfill_concurrency"),
            in_flight.label("in_flight"),
            live.label("live"),
            schedules,
        )
        .join(schedules, schedules.c.job_name == backfills.c.job_name)
        .where(backfills.c.state == "running", schedules.c.paused.is_(False))
        .order_by(backfills.c.created_at)
    )
    if one:
        # Its retries hold their occurrences' slots and go first: read it even when it is full.
        query = query.where(backfills.c.id == bindparam("only"))
    else:
        query = query.where(backfills.c.concurrency > in_flight)
    return db.locked(query, skip_locked=True, of=[backfills, schedules])


def _backfill_runs_query(db: Database, *, retries: bool) -> Any:
    query = select(runs).where(
        runs.c.backfill_id == bindparam("backfill"), runs.c.outcome == PENDING
    )
    if retries:
        query = query.where(
            runs.c.priority == PRIORITY_RETRY,
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
        )
    else:
        query = query.where(runs.c.priority == PRIORITY_BACKFILL)
    return _claimable(db, query, runs.c.occurrence)


def _wakeups_query(_db: Database) -> Any:
    skip: Any = bindparam("skip", expanding=True)
    return select(
        _earliest(
            schedules.c.due_at, schedules.c.due_at.is_not(None), schedules.c.job_name.not_in(skip)
        ),
        _earliest(
            runs.c.not_before,
            IS_PENDING,
            runs.c.priority < PRIORITY_BACKFILL,
            runs.c.not_before.is_not(None),
            runs.c.job_name.not_in(skip),
        ),
        _earliest(runs.c.lease_expires_at, IS_RUNNING, runs.c.lease_expires_at.is_not(None)),
        _earliest(
            runs.c.queued_at,
            IS_PENDING,
            runs.c.priority == PRIORITY_MANUAL,
            runs.c.not_before.is_(None),
            runs.c.job_name.not_in(skip),
        ),
        # A cancelled backfill with runs still in flight is finished by a claim too.
        _earliest(backfills.c.created_at, backfills.c.finished_at.is_(None)),
    )


def _earliest(column: Any, *where: Any) -> Any:
    return select(column).where(*where).order_by(column).limit(1).scalar_subquery()


def _update_pending(columns: Sequence[str], **values: str) -> Callable[[Database], Any]:
    """Set ``values`` and ``columns`` (from their parameters) of the run ``b_id`` still pending."""
    return lambda _db: (
        update(runs)
        .where(runs.c.id == bindparam("b_id"), runs.c.outcome == PENDING)
        .values(**values, **{column: bindparam(column) for column in columns})
    )


def _claimable(db: Database, query: Any, *order: Any) -> Any:
    """The first ``limit`` rows in ``order``, skipping rows another replica holds."""
    query = query.order_by(*order).limit(bindparam("limit"))
    return db.locked(query, skip_locked=True)
