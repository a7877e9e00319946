"""One turn of the firing loop: everything it does with the store, given ``now``.

Each job is claimed in a transaction of its own, so one slow or locked job never holds up the
others, and a replica that loses a race simply moves on to the next job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select, true, update
from sqlalchemy.engine import Connection, Engine

from jobhost.catalog import JobSpec
from jobhost.envelope.telemetry import Telemetry
from jobhost.firing.plan import NotRun, due_occurrences, plan_firing
from jobhost.firing.policy import firing_policy, lease_for, may_start
from jobhost.store import ScheduleRecord, claims, ledger, reading
from jobhost.store.claims import Claim, OccurrenceTakenError
from jobhost.store.records import PENDING, RUNNING, RequestRecord, RunRecord
from jobhost.store.registry import DesiredSchedule, SyncPlan, diff_schedules, sync_schedules
from jobhost.store.schema import run_requests, runs, schedules
from jobhost.triggers import Schedule

__all__ = ["TickResult", "Ticker", "desired_schedules"]

_log = logging.getLogger("jobhost.firing")


@dataclass
class TickResult:
    claims: list[tuple[Claim, JobSpec]] = field(default_factory=list)
    next_wake: datetime | None = None
    saturated: bool = False


class Ticker:
    """The store side of the loop for one host."""

    def __init__(
        self,
        engine: Engine,
        jobs: Mapping[str, JobSpec],
        *,
        host_id: str,
        lease_duration: timedelta,
        telemetry: Telemetry,
    ) -> None:
        self._engine = engine
        self._telemetry = telemetry
        self._jobs = jobs
        self._host_id = host_id
        self._lease = lease_duration
        self._desired = desired_schedules(jobs)
        # A stored lease further out than any renewal could set is corrupt or hand-edited.
        longest = max(
            [lease_for(s.declaration, lease_duration) for s in jobs.values()] or [lease_duration]
        )
        self._implausible_lease = 4 * max(longest, lease_duration)

    def sync(self, now: datetime) -> SyncPlan:
        """Upsert the catalog's schedules (logged by the caller at start)."""
        with self._engine.begin() as connection:
            return sync_schedules(connection, self._desired, now)

    def tick(self, now: datetime, free_slots: int) -> TickResult:
        result = TickResult()
        self._sweep(now)
        rows = self._read_schedules()
        if not diff_schedules(rows, self._desired).empty:
            plan = self.sync(now)
            _log.info("store schedules changed by another writer; resynced: %s", _summary(plan))
            rows = self._read_schedules()
        rows = self._repair(rows, now)
        due = [r for r in rows if _due(r, now) and r.job_name in self._jobs]
        for row in due:
            if free_slots <= 0:
                result.saturated = True
                break
            claim = self._fire(row.job_name, now)
            if claim is not None:
                result.claims.append((claim, self._jobs[claim.job_name]))
                free_slots -= 1
        if free_slots > 0:
            taken = self.take_requests(now, free_slots)
            result.claims.extend(taken)
            free_slots -= len(taken)
        if free_slots > 0:
            taken = self._take_retries(now, free_slots)
            result.claims.extend(taken)
            free_slots -= len(taken)
        else:
            result.saturated = True
        result.next_wake = self._next_wake(now)
        return result

    def _sweep(self, now: datetime) -> None:
        with self._engine.begin() as connection:
            for run in ledger.abandon_expired_runs(connection, now):
                self._telemetry.runs.add(1, {"job": run.job_name, "outcome": "abandoned"})
                _log.warning(
                    "job %s run %s abandoned: host %s stopped renewing its lease",
                    run.job_name,
                    run.id,
                    run.host_id,
                )
            ledger.release_expired_leases(connection, now)

    def _read_schedules(self) -> list[ScheduleRecord]:
        with reading(self._engine) as connection:
            rows = connection.execute(select(schedules)).mappings()
            return [ScheduleRecord.from_row(r) for r in rows]

    def _repair(self, rows: list[ScheduleRecord], now: datetime) -> list[ScheduleRecord]:
        """Stored values are not trusted blindly: a far-future value must not silence a job."""
        repaired = False
        for row in rows:
            spec = self._jobs.get(row.job_name)
            if spec is None or not row.enabled or row.orphaned:
                continue
            schedule = spec.schedule(row.interval_anchor or now)
            expected = schedule.next_after(now) if schedule is not None else None
            wrong_next = expected is not None and (
                row.next_occurrence is None or row.next_occurrence > expected
            )
            wrong_lease = (
                row.lease_expires_at is not None
                and row.lease_expires_at > now + self._implausible_lease
            )
            if not (wrong_next or wrong_lease):
                continue
            values: dict[str, object] = {}
            if wrong_next:
                _log.warning(
                    "job %s: stored next occurrence %s is not one its trigger produces "
                    "(expected %s); repaired",
                    row.job_name,
                    row.next_occurrence,
                    expected,
                )
                values["next_occurrence"] = expected
            if wrong_lease:
                _log.warning(
                    "job %s: stored lease expiry %s is implausibly far ahead; treated as expired",
                    row.job_name,
                    row.lease_expires_at,
                )
                values["lease_expires_at"] = now
            with self._engine.begin() as connection:
                # Compare-and-set on what was read, unless it was unreadable (then it is None).
                unchanged = (
                    schedules.c.next_occurrence == row.next_occurrence
                    if row.next_occurrence is not None
                    else true()
                )
                connection.execute(
                    update(schedules)
                    .where(schedules.c.job_name == row.job_name, unchanged)
                    .values(**values)
                )
                if wrong_lease and row.lease_run_id:
                    connection.execute(
                        update(runs)
                        .where(runs.c.id == row.lease_run_id, runs.c.outcome == RUNNING)
                        .values(lease_expires_at=now)
                    )
            repaired = True
        return self._read_schedules() if repaired else rows

    def _fire(self, job_name: str, now: datetime) -> Claim | None:
        spec = self._jobs[job_name]
        declaration = spec.declaration
        try:
            with self._engine.begin() as connection:
                row = claims.lock_schedule(connection, job_name)
                if row is None or not _due(row, now):
                    return None
                schedule = spec.schedule(row.interval_anchor or now)
                if schedule is None or row.next_occurrence is None:
                    return None
                live = claims.live_runs(connection, job_name, now)
                blocked = not may_start(declaration, len(live), row.lease_live(now))
                plan = plan_firing(
                    due_occurrences(schedule, row.next_occurrence, now),
                    now=now,
                    policy=firing_policy(declaration),
                    paused=row.paused,
                    blocked=blocked,
                    missed_through=row.missed_through,
                )
                if plan.unlisted:
                    _log.warning(
                        "job %s: %d more missed occurrences were not listed one by one",
                        job_name,
                        plan.unlisted,
                    )
                recorded = claims.record_not_run(
                    connection,
                    job_name,
                    [(n.occurrence, n.outcome, n.reason) for n in plan.not_run],
                    now,
                    self._host_id,
                )
                next_occurrence = (
                    plan.next_occurrence
                    if plan.next_occurrence is not None
                    else row.next_occurrence
                )
                if not claims.advance_schedule(
                    connection, row, next_occurrence, plan.missed_through
                ):
                    raise _MovedOnError(job_name)
                if recorded:
                    self._count_not_run(job_name, plan.not_run)
                if plan.run is None:
                    return None
                lease = lease_for(declaration, self._lease)
                run_id = claims.new_run_id()
                try:
                    claim = claims.start_run(
                        connection,
                        run_id=run_id,
                        job_name=job_name,
                        occurrence=plan.run,
                        attempt=1,
                        source=plan.source.value,
                        host_id=self._host_id,
                        fencing_token=row.fencing_token + 1,
                        idempotency_key=occurrence_key(job_name, plan.run),
                        now=now,
                        lease_until=now + lease,
                    )
                except OccurrenceTakenError as taken:
                    # The ledger already has this occurrence: keep the schedule moving past it.
                    _log.warning("%s; the ledger already has it, moving on", taken)
                    return None
                claims.take_lease(connection, row, self._host_id, run_id, now + lease)
                return claim
        except _MovedOnError as lost:
            _log.info("%s; another replica runs it", lost)
            return None

    def _count_not_run(self, job_name: str, items: list[NotRun]) -> None:
        for item in items:
            self._telemetry.runs.add(1, {"job": job_name, "outcome": item.outcome})
            _log.info(
                "job %s: occurrence %s %s (%s)",
                job_name,
                item.occurrence,
                item.outcome,
                item.reason,
            )

    def take_requests(self, now: datetime, limit: int) -> list[tuple[Claim, JobSpec]]:
        """Start up to ``limit`` pending manual run requests, oldest first, or refuse them."""
        taken: list[tuple[Claim, JobSpec]] = []
        with self._engine.begin() as connection:
            for request in claims.claim_pending_requests(connection, self._host_id, limit):
                started = self._start_request(connection, request, now)
                if started is not None:
                    taken.append(started)
        return taken

    def take_request(self, request_id: str, now: datetime) -> tuple[Claim, JobSpec] | None:
        """Start (or refuse) the one pending request ``request_id``, as a host would.

        ``jobhost trigger`` calls this to run a request in its own process when no host is
        alive. None when the request is no longer pending (a host took it) or was refused
        (the request's ``message`` says why).
        """
        with self._engine.begin() as connection:
            query = select(run_requests).where(
                run_requests.c.id == request_id, run_requests.c.status == PENDING
            )
            if connection.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            found = connection.execute(query).mappings().first()
            if found is None:
                return None
            request = RequestRecord.from_row(found)
            connection.execute(
                update(run_requests)
                .where(run_requests.c.id == request_id)
                .values(status="claimed", claimed_by=self._host_id)
            )
            return self._start_request(connection, request, now)

    def _start_request(
        self, connection: Connection, request: RequestRecord, now: datetime
    ) -> tuple[Claim, JobSpec] | None:
        """Start the claimed ``request`` under the job's lease, or record why it is refused."""
        spec = self._jobs.get(request.job_name)
        if spec is None:
            claims.refuse_request(
                connection,
                request.id,
                f"job {request.job_name!r} is not declared by the modules of host {self._host_id}",
            )
            return None
        row = claims.lock_schedule(connection, request.job_name)
        live = claims.live_runs(connection, request.job_name, now)
        lease_live = row.lease_live(now) if row is not None else False
        if not may_start(spec.declaration, len(live), lease_live):
            claims.refuse_request(connection, request.id, _overlap_message(live))
            return None
        if row is None:
            claims.refuse_request(
                connection,
                request.id,
                f"job {request.job_name!r} has no schedule in the store yet",
            )
            return None
        lease = lease_for(spec.declaration, self._lease)
        run_id = claims.new_run_id()
        token = claims.take_lease(connection, row, self._host_id, run_id, now + lease)
        claim = claims.start_run(
            connection,
            run_id=run_id,
            job_name=request.job_name,
            occurrence=None,
            attempt=1,
            source="manual",
            host_id=self._host_id,
            fencing_token=token,
            idempotency_key=f"{request.job_name}:manual:{run_id}",
            now=now,
            lease_until=now + lease,
            requested_by=request.requested_by,
            reason=request.reason,
        )
        connection.execute(
            update(run_requests)
            .where(run_requests.c.id == request.id)
            .values(status="started", run_id=run_id)
        )
        return claim, spec

    def _take_retries(self, now: datetime, limit: int) -> list[tuple[Claim, JobSpec]]:
        taken: list[tuple[Claim, JobSpec]] = []
        with self._engine.begin() as connection:
            for pending in claims.claim_pending_retries(connection, now, limit):
                spec = self._jobs.get(pending.job_name)
                if spec is None:
                    continue
                row = claims.lock_schedule(connection, pending.job_name)
                if row is None:
                    continue
                live = claims.live_runs(connection, pending.job_name, now)
                if not may_start(spec.declaration, len(live), row.lease_live(now)):
                    continue
                lease = lease_for(spec.declaration, self._lease)
                token = claims.take_lease(connection, row, self._host_id, pending.id, now + lease)
                claim = claims.activate_retry(
                    connection,
                    pending,
                    host_id=self._host_id,
                    fencing_token=token,
                    now=now,
                    lease_until=now + lease,
                )
                if claim is not None:
                    taken.append((claim, spec))
        return taken

    def _next_wake(self, now: datetime) -> datetime | None:
        """The earliest instant anything in the store becomes due."""
        with reading(self._engine) as connection:
            candidates = [
                connection.execute(
                    select(schedules.c.next_occurrence)
                    .where(
                        schedules.c.enabled.is_(True),
                        schedules.c.orphaned.is_(False),
                        schedules.c.next_occurrence.is_not(None),
                    )
                    .order_by(schedules.c.next_occurrence)
                    .limit(1)
                ).scalar(),
                connection.execute(
                    select(runs.c.not_before)
                    .where(runs.c.outcome == PENDING)
                    .order_by(runs.c.not_before)
                    .limit(1)
                ).scalar(),
                connection.execute(
                    select(runs.c.lease_expires_at)
                    .where(runs.c.outcome == RUNNING)
                    .order_by(runs.c.lease_expires_at)
                    .limit(1)
                ).scalar(),
            ]
        times = [c for c in candidates if isinstance(c, datetime)]
        return min(times) if times else None


def desired_schedules(jobs: Mapping[str, JobSpec]) -> list[DesiredSchedule]:
    return [
        DesiredSchedule(
            job_name=spec.name,
            module=spec.module,
            trigger_kind=spec.trigger.kind,
            trigger_expression=spec.trigger.expression,
            timezone=spec.trigger.timezone,
            trigger_source=spec.trigger.source,
            enabled=spec.enabled,
            schedule_for=_schedule_factory(spec),
        )
        for spec in jobs.values()
    ]


def occurrence_key(job_name: str, occurrence: datetime) -> str:
    """The idempotency key shared by every attempt at one occurrence."""
    return f"{job_name}:{occurrence.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _schedule_factory(spec: JobSpec) -> Callable[[datetime], Schedule | None]:
    return spec.schedule


class _MovedOnError(Exception):
    """The schedule changed between reading and advancing it: another replica got there."""

    def __init__(self, job: str) -> None:
        super().__init__(f"job {job!r}: schedule advanced concurrently")


def _due(row: ScheduleRecord, now: datetime) -> bool:
    return (
        row.enabled
        and not row.orphaned
        and row.next_occurrence is not None
        and row.next_occurrence <= now
    )


def _overlap_message(running: list[RunRecord]) -> str:
    if not running:
        return "refused: a run of this job is still running (overlap policy forbid)"
    first = running[0]
    started = first.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") if first.started_at else "?"
    return (
        f"refused: run {first.id} is still running on host {first.host_id} since {started} "
        "(overlap policy forbid)"
    )


def _summary(plan: SyncPlan) -> str:
    return f"{len(plan.added)} added, {len(plan.changed)} changed, {len(plan.orphaned)} orphaned"
