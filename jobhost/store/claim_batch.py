"""One claim's batch: what each pending run and due schedule row it read becomes (a run started,
a manual run refused or left waiting, an occurrence recorded without an attempt), asked
of the caller's :class:`~jobhost.store.claim_model.ClaimRules` and the concurrency groups, and
then written for the whole batch in a handful of statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from jobhost.records import (
    PRIORITY_MANUAL,
    RUNNING,
    Claim,
    ClaimBatch,
    DueSchedule,
    PlannedRow,
    RunRecord,
    SchedulePlan,
    new_run_id,
    occurrence_key,
)
from jobhost.store._sql import insert_ignoring_duplicates, insert_returning_new, locked
from jobhost.store.claim_model import ClaimRules, schedule_problem
from jobhost.store.claim_reads import DUE_COLUMNS, live_runs
from jobhost.store.claim_writes import (
    advance_schedules,
    advance_tokens,
    lease_schedules,
    refuse_pending,
    start_pending,
)
from jobhost.store.groups import GroupGate
from jobhost.store.schema import runs, schedules
from jobhost.store.signals import notify

__all__ = ["ClaimWork"]

_RUN_COLUMNS = ("job_name", "occurrence", "attempt")


@dataclass
class _Job:
    """One job's schedule row as the batch changes it."""

    row: PlannedRow
    token: int
    lease_live: bool
    live_runs: int = 0
    started: list[Claim] = field(default_factory=list)
    plan: SchedulePlan | None = None


class ClaimWork:
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
        self._pending: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._announce = False
        self._claims: dict[str, Claim] = {}
        self._groups = GroupGate(connection, now)
        self.taken = 0

    def lock_rows(self, names: set[str]) -> None:
        if not names:
            return
        query = locked(
            self._connection, select(*DUE_COLUMNS).where(schedules.c.job_name.in_(sorted(names)))
        )
        self.adopt([DueSchedule._make(r) for r in self._connection.execute(query)])

    def adopt(self, rows: Sequence[PlannedRow]) -> None:
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
                    # A backfill's runs yield to the schedule: they are not counted here.
                    runs.c.backfill_id.is_(None),
                )
                .group_by(runs.c.job_name)
            )
            for name, count in self._connection.execute(query):
                if name in self._jobs:
                    self._jobs[name].live_runs = int(count)

    def start_pending(self, run: RunRecord) -> None:
        """Start a pending run: a manual run or a retry (a backfill's retries too; its waiting
        occurrences are the backfill claim's). A manual run nobody has looked at yet is refused
        (recorded skipped) when its job cannot start now; any other waits, pending, for its job
        or its concurrency group."""
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
        reason = "; ".join(r for r in (run.reason, beside) if r) or None
        claim = self._start(
            job,
            occurrence=run.occurrence,
            attempt=run.attempt,
            source=run.source,
            key=run.idempotency_key or f"{name}:{run.id}",
            requested_by=run.requested_by,
            reason=reason,
            queued_at=run.queued_at,
            run_id=run.id,
            backfill_id=run.backfill_id,
            attempt_base=run.attempt_base,
        )
        assert claim.lease_until is not None
        self._announce |= run.source == "manual"
        self._pending.append(
            {
                "b_id": run.id,
                "host_id": self._host,
                "fencing_token": claim.fencing_token,
                "started_at": self._now,
                "lease_expires_at": claim.lease_until,
                "reason": reason,
            }
        )

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

    def fire_early(self, row: PlannedRow) -> None:
        """Claim the occurrence the row is due at (after now), to start then; only one that
        would run as it stands: a job busy now, in a concurrency group or with occurrences to
        record is left to the claim at its instant, which sees the world as it is then."""
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
        self._start(
            job,
            occurrence=at,
            attempt=1,
            source=plan.source,
            key=occurrence_key(row.job_name, at),
            starts_at=at,
        )

    def write(self) -> None:
        """Everything the batch decided, in a few statements."""
        connection = self._connection
        self._groups.write()
        self._batch.group_waits = self._groups.waits
        inserted = set(insert_returning_new(connection, runs, self._runs, _RUN_COLUMNS))
        if self._pending:
            start_pending(connection, self._pending)
            inserted |= {r["b_id"] for r in self._pending}
        if self._refused:
            refuse_pending(connection, self._refused)
        if self._announce:
            # Whoever waits for a manual run's answer (the API, `jobhost trigger`) is woken.
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
        tokens: list[dict[str, Any]] = []
        for name, job in self._jobs.items():
            started = [c for c in job.started if c.run_id in inserted]
            taken = [c for c in started if c.backfill_id is None]
            if started and not taken:
                tokens.append({"b_job": name, "fencing_token": job.token})
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
            advance_schedules(self._connection, advanced)
        if leased:
            lease_schedules(self._connection, leased)
        if tokens:
            advance_tokens(self._connection, tokens)

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
        starts_at: datetime | None = None,
        backfill_id: str | None = None,
        attempt_base: int = 0,
    ) -> Claim:
        name = job.row.job_name
        started_at = starts_at or self._now
        new_id = run_id or new_run_id()
        job.token += 1
        if backfill_id is None:
            # A backfill's run (a retry, here) yields to the schedule: it neither holds the
            # job's lease nor counts against its overlap rule (see backfill_claims).
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
            started_at=started_at,
            requested_by=requested_by,
            reason=reason,
            lease_until=lease_until,
            record_by=_record_by(job, occurrence),
            backfill_id=backfill_id,
            attempt_base=attempt_base,
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
                    "started_at": started_at,
                    "lease_expires_at": lease_until,
                }
            )
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
        running = live_runs(self._connection, job_name, self._now)
        if not running:
            return "refused: a run of this job is still running (overlap policy forbid)"
        first = running[0]
        started = first.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") if first.started_at else "?"
        return (
            f"refused: run {first.id} is still running on host {first.host_id} since {started} "
            "(overlap policy forbid)"
        )


def _record_by(job: _Job, occurrence: datetime | None) -> datetime | None:
    """The first instant a claim looks at the job's row again after the run of ``occurrence``
    (see :attr:`Claim.record_by`); None for any other run or a job in a concurrency group, whose
    live runs other jobs' claims count."""
    plan = job.plan
    if occurrence is None or plan is None or plan.run != occurrence:
        return None
    if job.row.concurrency_group is not None:
        return None
    looks = [at for at in (plan.next_occurrence, plan.due_at) if at is not None]
    return min(looks, default=None)
