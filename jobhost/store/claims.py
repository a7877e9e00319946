"""Claiming work: the one path by which every run starts.

:func:`claim_work` takes, in one transaction, up to ``slots`` runs for one host: pending manual
run requests first (a person is waiting), then retries whose backoff has passed, then due
schedules found through the index on ``due_at``, oldest first. It locks what it reads (``FOR
UPDATE SKIP LOCKED`` on PostgreSQL, so replicas divide the work instead of queueing on it; on
SQLite the transaction holds the write lock), asks the caller's :class:`ClaimRules` what each
row means, and writes the answer for the whole batch in a handful of statements: run rows
inserted together, each job's fencing token advanced exactly once per run it starts, schedules
moved on. The run row's unique constraint on (job, occurrence, attempt) stays the last word: an
insert it refuses is dropped from the batch, never run twice.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Connection

from jobhost.store._sql import (
    built,
    columns_of,
    insert_ignoring_duplicates,
    insert_returning_new,
    locked,
    unnest_rows,
)
from jobhost.store.groups import GroupGate
from jobhost.store.records import PENDING, RUNNING, RequestRecord, RunRecord, ScheduleRecord
from jobhost.store.schema import IS_PENDING, run_requests, runs, schedules
from jobhost.store.signals import notify

__all__ = [
    "Claim",
    "ClaimBatch",
    "ClaimRules",
    "SchedulePlan",
    "claim_work",
    "due_job_names",
    "live_runs",
    "new_run_id",
    "occurrence_key",
    "schedule_problem",
]

_RUN_COLUMNS = ("job_name", "occurrence", "attempt")


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

    def plan(self, row: ScheduleRecord, now: datetime, blocked: bool) -> SchedulePlan | None:
        """The plan for a due row; None leaves the row untouched (its problem is reported)."""
        ...


@dataclass
class ClaimBatch:
    """What one call of :func:`claim_work` did."""

    claims: list[Claim] = field(default_factory=list)
    not_run: list[tuple[str, datetime, str, str]] = field(default_factory=list)
    """(job, occurrence, outcome, reason) newly recorded without an attempt."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(request id, message) for manual requests that cannot run."""
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


def claim_work(
    connection: Connection,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    request_slots: int = 0,
    skip: Collection[str] = (),
    request_id: str | None = None,
    retry_id: str | None = None,
    schedules_only: Collection[str] | None = None,
    requests: bool = True,
    retries: bool = True,
) -> ClaimBatch:
    """Claim up to ``slots`` runs (plus ``request_slots`` for manual requests only).

    ``skip`` names jobs not to touch (unknown to this host, or set aside as corrupt).
    ``request_id`` claims only that manual request, ``retry_id`` only that pending retry (an
    operator's retry of one run, run in the command's process); ``schedules_only`` limits the
    schedule part to those jobs (the one-job-at-a-time fallback after a batch failed).
    ``requests`` and ``retries`` False leave out the reads of pending manual requests and due
    retries: the caller knows there are none (a statement less each, on every turn of a busy
    host).
    """
    batch = ClaimBatch()
    work = _Work(connection, host_id=host_id, now=now, rules=rules, batch=batch)
    skipped = list(skip)
    if schedules_only is None:
        asked = (
            _pending_requests(
                connection,
                slots + request_slots if requests else 0,
                skip=skipped,
                request_id=request_id,
                rules=rules,
                batch=batch,
            )
            if retry_id is None
            else []
        )
        again = (
            _due_retries(
                connection, now, slots, skip=skipped, rules=rules, batch=batch, run_id=retry_id
            )
            if request_id is None and (retries or retry_id is not None)
            else []
        )
        work.lock_rows({r.job_name for r in asked} | {r.job_name for r in again})
        for request in asked:
            if work.taken < slots + request_slots:
                work.start_request(request)
        for retry in again:
            if work.taken < slots:
                work.start_retry(retry)
    if request_id is None and retry_id is None and work.taken < slots:
        rows = _due_schedules(
            connection, now, slots - work.taken, skip=skipped, only=schedules_only, batch=batch
        )
        batch.unknown |= {r.job_name for r in rows if not rules.knows(r.job_name)}
        rows = [r for r in rows if rules.knows(r.job_name)]
        work.adopt(rows)
        for row in rows:
            if work.taken < slots:
                work.fire(row)
    work.write()
    return batch


def live_runs(connection: Connection, job_name: str, now: datetime) -> list[RunRecord]:
    """Runs of the job whose lease has not expired."""
    query = select(runs).where(
        runs.c.job_name == job_name, runs.c.outcome == RUNNING, runs.c.lease_expires_at >= now
    )
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def due_job_names(connection: Connection, now: datetime, limit: int) -> list[str]:
    """Jobs whose schedule row is due at ``now``, oldest first (read without locking)."""
    query = (
        select(schedules.c.job_name)
        .where(schedules.c.due_at <= now)
        .order_by(schedules.c.due_at)
        .limit(limit)
    )
    return list(connection.execute(query).scalars())


def schedule_problem(row: ScheduleRecord) -> str | None:
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
    return f"{job_name}:{occurrence.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def new_run_id() -> str:
    return uuid.uuid4().hex


# -- the batch ----------------------------------------------------------------------------------


@dataclass
class _Job:
    """One job's schedule row as the batch changes it."""

    row: ScheduleRecord
    token: int
    lease_live: bool
    live_runs: int = 0
    started: list[Claim] = field(default_factory=list)
    plan: SchedulePlan | None = None


class _Work:
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
        self._retries: list[dict[str, Any]] = []
        self._requests: list[dict[str, Any]] = []
        self._claims: dict[str, Claim] = {}
        self._groups = GroupGate(connection, now)
        self.taken = 0

    def lock_rows(self, names: set[str]) -> None:
        if not names:
            return
        query = locked(
            self._connection, select(schedules).where(schedules.c.job_name.in_(sorted(names)))
        )
        self.adopt([ScheduleRecord.from_row(r) for r in self._connection.execute(query).mappings()])

    def adopt(self, rows: list[ScheduleRecord]) -> None:
        """Take rows read under lock into the batch, with their live-run counts."""
        fresh = [r for r in rows if r.job_name not in self._jobs]
        for row in fresh:
            name = row.job_name
            problem = schedule_problem(row)
            if problem is not None:
                self._batch.corrupt[row.job_name] = problem
                continue
            live = (
                row.lease_owner is not None
                and row.lease_expires_at is not None
                # A lease further out than any renewal could set is corrupt: not live.
                and self._now <= row.lease_expires_at <= self._now + 4 * self._rules.lease(name)
            )
            self._jobs[row.job_name] = _Job(row, row.fencing_token, live)
        counted = [r.job_name for r in fresh if self._rules.counts_live_runs(r.job_name)]
        if counted:
            query = (
                select(runs.c.job_name, func.count())
                .where(
                    runs.c.job_name.in_(counted),
                    runs.c.outcome == RUNNING,
                    runs.c.lease_expires_at >= self._now,
                )
                .group_by(runs.c.job_name)
            )
            for name, count in self._connection.execute(query):
                if name in self._jobs:
                    self._jobs[name].live_runs = int(count)

    def start_request(self, request: RequestRecord) -> None:
        job = self._jobs.get(request.job_name)
        if job is None:
            self._refuse(request, f"job {request.job_name!r} has no schedule in the store yet")
            return
        if not self._may_start(job):
            self._refuse(request, self._overlap_message(request.job_name))
            return
        beside = self._groups.beside(job.row) if request.beside_limit else None
        if not request.beside_limit and not self._groups.admit(job.row, queue_order=False):
            self._queue_for_group(request, job)
            return
        claim = self._start(
            job,
            occurrence=None,
            attempt=1,
            source="manual",
            key=None,
            requested_by=request.requested_by,
            reason="; ".join(r for r in (request.reason, beside) if r) or None,
            queued_at=request.requested_at,
        )
        self._requests.append(
            {"b_id": request.id, "status": "started", "run_id": claim.run_id, "message": None}
        )

    def start_retry(self, retry: RunRecord) -> None:
        job = self._jobs.get(retry.job_name)
        if job is None or not self._may_start(job):
            if job is not None:
                self._batch.waiting.add(retry.job_name)
            return  # stays pending; its job is busy or not scheduled here yet
        if not self._groups.admit(job.row, queue_order=False):
            self._groups.park_run(retry, job.row.concurrency_group)
            return
        self._groups.started_run(retry)
        claim = self._start(
            job,
            occurrence=retry.occurrence,
            attempt=retry.attempt,
            source=retry.source,
            key=retry.idempotency_key or f"{retry.job_name}:{retry.id}",
            requested_by=retry.requested_by,
            reason=retry.reason,
            queued_at=retry.queued_at,
            run_id=retry.id,
        )
        if retry.backfill_id is not None:
            claim = self._claims[retry.id] = replace(claim, backfill_id=retry.backfill_id)
        assert claim.lease_until is not None
        self._retries.append(
            {
                "b_id": retry.id,
                "host_id": self._host,
                "fencing_token": claim.fencing_token,
                "started_at": self._now,
                "lease_expires_at": claim.lease_until,
            }
        )

    def fire(self, row: ScheduleRecord) -> None:
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
        for occurrence, outcome, reason in plan.not_run:
            self._batch.not_run.append((row.job_name, occurrence, outcome, reason))
        if plan.run is not None:
            self._start(
                job,
                occurrence=plan.run,
                attempt=1,
                source=plan.source,
                key=occurrence_key(row.job_name, plan.run),
            )

    def write(self) -> None:
        """Everything the batch decided, in a few statements."""
        connection = self._connection
        self._groups.write()
        self._batch.group_waits = self._groups.waits
        inserted = set(insert_returning_new(connection, runs, self._runs, _RUN_COLUMNS))
        if self._retries:
            connection.execute(built(connection, "start-retries", _start_retries), self._retries)
            inserted |= {r["b_id"] for r in self._retries}
        if self._requests:
            rows = [{**row, "claimed_by": self._host} for row in self._requests]
            connection.execute(built(connection, "settle-requests", _settle_requests), rows)
            # Whoever waits for the request's answer (the API, `jobhost trigger`) is woken.
            notify(connection)
        self._write_schedules(inserted)
        self._batch.claims = [c for run_id, c in self._claims.items() if run_id in inserted]
        recorded = insert_ignoring_duplicates(
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
                for name, occurrence, outcome, reason in self._batch.not_run
            ],
            _RUN_COLUMNS,
        )
        if recorded < len(self._batch.not_run):
            # Another writer recorded some first; report only what this batch wrote.
            self._batch.not_run = self._batch.not_run[:recorded]

    def _write_schedules(self, inserted: set[str]) -> None:
        leased: list[dict[str, Any]] = []
        advanced: list[dict[str, Any]] = []
        for name, job in self._jobs.items():
            taken = [c for c in job.started if c.run_id in inserted]
            if job.plan is None and not taken:
                continue
            values: dict[str, Any] = {"b_job": name}
            if job.plan is not None:
                values |= {
                    "next_occurrence": job.plan.next_occurrence,
                    "due_at": job.plan.due_at,
                    "missed_through": job.plan.missed_through,
                }
            else:
                values |= {
                    "next_occurrence": job.row.next_occurrence,
                    "due_at": job.row.due_at,
                    "missed_through": job.row.missed_through,
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
        if advanced:
            _move_schedules(self._connection, "advance-schedules", _MOVED, advanced)
        if leased:
            _move_schedules(self._connection, "lease-schedules", _LEASED, leased)

    def _may_start(self, job: _Job) -> bool:
        return self._rules.may_start(job.row.job_name, job.live_runs, job.lease_live)

    def _start(
        self,
        job: _Job,
        *,
        occurrence: datetime | None,
        attempt: int,
        source: str,
        key: str | None,
        requested_by: str | None = None,
        reason: str | None = None,
        queued_at: datetime | None = None,
        run_id: str | None = None,
    ) -> Claim:
        name = job.row.job_name
        new_id = run_id or new_run_id()
        job.token += 1
        job.live_runs += 1
        job.lease_live = True
        lease_until = self._now + self._rules.lease(name)
        claim = Claim(
            run_id=new_id,
            job_name=name,
            occurrence=occurrence,
            attempt=attempt,
            source=source,
            fencing_token=job.token,
            idempotency_key=key or f"{name}:manual:{new_id}",
            started_at=self._now,
            requested_by=requested_by,
            reason=reason,
            lease_until=lease_until,
        )
        job.started.append(claim)
        self._claims[new_id] = claim
        self.taken += 1
        if run_id is None:
            self._runs.append(
                {
                    "id": new_id,
                    "job_name": name,
                    "occurrence": occurrence,
                    "attempt": attempt,
                    "source": source,
                    "outcome": RUNNING,
                    "host_id": self._host,
                    "fencing_token": job.token,
                    "idempotency_key": claim.idempotency_key,
                    "requested_by": requested_by,
                    "reason": reason,
                    "queued_at": queued_at or self._now,
                    "started_at": self._now,
                    "lease_expires_at": lease_until,
                }
            )
        return claim

    def _queue_for_group(self, request: RequestRecord, job: _Job) -> None:
        message = f"queued: {self._groups.waiting_message(job.row)}"
        run_id = self._groups.queue_request(request, job.row)
        self._requests.append(
            {"b_id": request.id, "status": "queued", "run_id": run_id, "message": message}
        )

    def _refuse(self, request: RequestRecord, message: str) -> None:
        self._batch.refused.append((request.id, message))
        self._requests.append(
            {"b_id": request.id, "status": "refused", "run_id": None, "message": message}
        )

    def _overlap_message(self, job_name: str) -> str:
        running = live_runs(self._connection, job_name, self._now)
        if not running:
            return "refused: a run of this job is still running (overlap policy forbid)"
        first = running[0]
        started = first.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") if first.started_at else "?"
        return (
            f"refused: run {first.id} is still running on host {first.host_id} since {started} "
            "(overlap policy forbid)"
        )


# -- the batch's statements, built once --------------------------------------------------------


def _start_retries(_dialect: str) -> Any:
    return (
        update(runs)
        .where(runs.c.id == bindparam("b_id"), runs.c.outcome == PENDING)
        .values(
            outcome=RUNNING,
            host_id=bindparam("host_id"),
            fencing_token=bindparam("fencing_token"),
            started_at=bindparam("started_at"),
            lease_expires_at=bindparam("lease_expires_at"),
        )
    )


def _settle_requests(_dialect: str) -> Any:
    return (
        update(run_requests)
        .where(run_requests.c.id == bindparam("b_id"))
        .values(
            status=bindparam("status"),
            run_id=bindparam("run_id"),
            message=bindparam("message"),
            claimed_by=bindparam("claimed_by"),
        )
    )


_MOVED = ("next_occurrence", "due_at", "missed_through")
_LEASED = (*_MOVED, "fencing_token", "lease_owner", "lease_expires_at", "lease_run_id")


def _move_schedules(
    connection: Connection, name: str, columns: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """Write ``columns`` of each job's schedule row (``b_job`` names the job; one row a job).

    On PostgreSQL one statement from arrays whatever the batch size (see
    :func:`~jobhost.store._sql.unnest_rows`); elsewhere an executemany."""

    def build(dialect: str) -> Any:
        if dialect == "postgresql":
            source = unnest_rows(
                [("b_job", schedules.c.job_name.type)]
                + [(column, schedules.c[column].type) for column in columns]
            )
            return (
                update(schedules)
                .where(schedules.c.job_name == source.c.b_job)
                .values(**{column: source.c[column] for column in columns})
            )
        return (
            update(schedules)
            .where(schedules.c.job_name == bindparam("b_job"))
            .values(**{column: bindparam(column) for column in columns})
        )

    statement = built(connection, name, build)
    connection.execute(
        statement, columns_of(rows) if connection.dialect.name == "postgresql" else rows
    )


# -- reading what is due ----------------------------------------------------------------------


def _pending_requests(
    connection: Connection,
    limit: int,
    *,
    skip: list[str],
    request_id: str | None,
    rules: ClaimRules,
    batch: ClaimBatch,
) -> list[RequestRecord]:
    if limit <= 0:
        return []
    if request_id is not None:
        query = locked(
            connection,
            select(run_requests).where(
                run_requests.c.status == PENDING, run_requests.c.id == request_id
            ),
        )
        params: dict[str, Any] = {}
    else:
        query = built(connection, "pending-requests", _pending_requests_query)
        params = {"skip": skip, "limit": limit}
    found = [RequestRecord.from_row(r) for r in connection.execute(query, params).mappings()]
    batch.unknown |= {r.job_name for r in found if not rules.knows(r.job_name)}
    return [r for r in found if rules.knows(r.job_name)]


def _pending_requests_query(dialect: str) -> Any:
    query = (
        select(run_requests)
        .where(
            run_requests.c.status == PENDING,
            run_requests.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(run_requests.c.requested_at)
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def _due_retries(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    rules: ClaimRules,
    batch: ClaimBatch,
    run_id: str | None = None,
) -> list[RunRecord]:
    if limit <= 0:
        return []
    if run_id is not None:
        one = locked(connection, select(runs).where(runs.c.id == run_id, runs.c.outcome == PENDING))
        rows = connection.execute(one).mappings()
    else:
        query = built(connection, "due-retries", _due_retries_query)
        rows = connection.execute(query, {"now": now, "skip": skip, "limit": limit}).mappings()
    found = [RunRecord.from_row(r) for r in rows]
    batch.unknown |= {r.job_name for r in found if not rules.knows(r.job_name)}
    return [r for r in found if rules.knows(r.job_name)]


def _due_retries_query(dialect: str) -> Any:
    query = (
        select(runs)
        .where(
            IS_PENDING,
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
            runs.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(runs.c.not_before)
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def _due_schedules(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    only: Collection[str] | None,
    batch: ClaimBatch,
) -> list[ScheduleRecord]:
    if only is not None:
        query = locked(
            connection,
            select(schedules)
            .where(schedules.c.due_at <= now, schedules.c.job_name.in_(sorted(only)))
            .order_by(schedules.c.due_at)
            .limit(limit),
        )
        result = connection.execute(query)
    else:
        query = built(connection, "due-schedules", _due_schedules_query)
        result = connection.execute(query, {"now": now, "skip": skip, "limit": limit})
    rows = [ScheduleRecord.from_row(r) for r in result.mappings()]
    batch.schedules_seen = len(rows)
    return rows


def _due_schedules_query(dialect: str) -> Any:
    query = (
        select(schedules)
        .where(
            schedules.c.due_at <= bindparam("now", type_=schedules.c.due_at.type),
            schedules.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(schedules.c.due_at)
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def _skip_locked(query: Any, dialect: str) -> Any:
    """Skip rows another replica holds (PostgreSQL); SQLite's transaction holds the file."""
    return query.with_for_update(skip_locked=True) if dialect == "postgresql" else query
