"""One turn of the firing loop: everything it does with the store, given ``now``.

Each job is claimed in a transaction of its own, so one slow or locked job never holds up the
others, and a replica that loses a race simply moves on to the next job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.catalog import JobSpec
from jobhost.envelope.telemetry import Telemetry
from jobhost.firing.plan import NotRun, due_occurrences, plan_firing
from jobhost.firing.policy import firing_policy, lease_for, may_start
from jobhost.firing.queued import QueuedWork
from jobhost.firing.upkeep import record_abandoned, repair_schedules
from jobhost.store import ScheduleRecord, claims, reading
from jobhost.store.claims import Claim, OccurrenceTakenError
from jobhost.store.records import PENDING, RUNNING
from jobhost.store.registry import DesiredSchedule, SyncPlan, diff_schedules, sync_schedules
from jobhost.store.schema import runs, schedules
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
        self._queued = QueuedWork(engine, jobs, host_id=host_id, lease=lease_duration)

    def sync(self, now: datetime) -> SyncPlan:
        """Upsert the catalog's schedules (logged by the caller at start)."""
        with self._engine.begin() as connection:
            return sync_schedules(connection, self._desired, now)

    def tick(self, now: datetime, free_slots: int) -> TickResult:
        result = TickResult()
        record_abandoned(self._engine, now, self._telemetry, self._jobs)
        rows = self._read_schedules()
        if not diff_schedules(rows, self._desired).empty:
            plan = self.sync(now)
            _log.info("store schedules changed by another writer; resynced: %s", _summary(plan))
            rows = self._read_schedules()
        if repair_schedules(self._engine, self._jobs, rows, now, self._implausible_lease):
            rows = self._read_schedules()
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
            taken = self._queued.take_retries(now, free_slots)
            result.claims.extend(taken)
            free_slots -= len(taken)
        else:
            result.saturated = True
        result.next_wake = self._next_wake(now, rows)
        return result

    def take_requests(self, now: datetime, limit: int) -> list[tuple[Claim, JobSpec]]:
        """Start up to ``limit`` pending manual run requests, oldest first, or refuse them."""
        return self._queued.take_requests(now, limit)

    def take_request(self, request_id: str, now: datetime) -> tuple[Claim, JobSpec] | None:
        """Start (or refuse) the one pending request ``request_id``; see :class:`QueuedWork`."""
        return self._queued.take_request(request_id, now)

    def _read_schedules(self) -> list[ScheduleRecord]:
        with reading(self._engine) as connection:
            rows = connection.execute(select(schedules)).mappings()
            return [ScheduleRecord.from_row(r) for r in rows]

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

    def _next_wake(self, now: datetime, rows: list[ScheduleRecord]) -> datetime | None:
        """The earliest instant something in the store may need this host.

        A job still due after the tick (paused, or waiting behind its running run) does not
        count as due now, or the loop would spin: it counts from its trigger's next occurrence,
        and a finishing run wakes the loop anyway.
        """
        times: list[datetime] = []
        for row in rows:
            spec = self._jobs.get(row.job_name)
            if spec is None or not row.enabled or row.orphaned or row.next_occurrence is None:
                continue
            if row.next_occurrence > now:
                times.append(row.next_occurrence)
                continue
            schedule = spec.schedule(row.interval_anchor or now)
            upcoming = schedule.next_after(now) if schedule is not None else None
            if upcoming is not None:
                times.append(upcoming)
        with reading(self._engine) as connection:
            for column, outcome in (
                (runs.c.not_before, PENDING),
                (runs.c.lease_expires_at, RUNNING),
            ):
                first = connection.execute(
                    select(column).where(runs.c.outcome == outcome).order_by(column).limit(1)
                ).scalar()
                if isinstance(first, datetime):
                    times.append(first)
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


def _summary(plan: SyncPlan) -> str:
    return f"{len(plan.added)} added, {len(plan.changed)} changed, {len(plan.orphaned)} orphaned"
