"""Operators' actions as store operations: each makes its change and writes its entry in the
change log (``job_changes``) in one transaction the store opens, so an action is never done
without its entry nor logged without being done.

``jobhost.operations.jobs`` is the one caller; a new action is one more function here and
one there (the actions on one run, a retry and a cancel, are in ``jobhost.store.run_actions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import BackfillRecord, DesiredSchedule, ScheduleRecord
from jobhost.store import backfills
from jobhost.store.clock import database_now
from jobhost.store.operations import get_schedule, pause_job, request_run, resume_job
from jobhost.store.registry import sync_schedules
from jobhost.store.runtime import record_change

__all__ = [
    "Paused",
    "backfill_logged",
    "cancel_backfill_logged",
    "pause_logged",
    "pause_many_logged",
    "request_logged",
    "resume_logged",
    "resume_many_logged",
]


@dataclass(frozen=True)
class Paused:
    """What a pause or resume changed, when, and the schedule row (after a pause, before a
    resume)."""

    changed: bool
    at: datetime
    row: ScheduleRecord | None


def pause_logged(
    engine: Engine,
    job: str,
    *,
    actor: str,
    reason: str,
    clock: Clock,
    schedule_if_unknown: Sequence[DesiredSchedule] = (),
) -> Paused:
    """Pause ``job`` for every replica. A job the store has no row for yet is scheduled first
    from ``schedule_if_unknown`` (as a starting host would), so it can be paused before any host
    has run."""
    (done,) = pause_many_logged(
        engine, [job], actor=actor, reason=reason, clock=clock, schedules={job: schedule_if_unknown}
    )
    return done


def pause_many_logged(
    engine: Engine,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str,
    clock: Clock,
    schedules: Mapping[str, Sequence[DesiredSchedule]] | None = None,
) -> list[Paused]:
    """Pause every job of ``jobs`` in one transaction, one change-log entry per job paused;
    ``schedules`` (job → its declared schedules) for jobs the store may not know yet."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        return [
            _pause_one(
                connection,
                job,
                schedule_if_unknown=(schedules or {}).get(job, ()),
                actor=actor,
                reason=reason,
                now=now,
            )
            for job in jobs
        ]


def resume_logged(
    engine: Engine, job: str, *, actor: str, reason: str | None, clock: Clock
) -> Paused:
    """Resume ``job``; ``row`` is None when the store has never scheduled it."""
    (done,) = resume_many_logged(engine, [job], actor=actor, reason=reason, clock=clock)
    return done


def resume_many_logged(
    engine: Engine, jobs: Sequence[str], *, actor: str, reason: str | None, clock: Clock
) -> list[Paused]:
    """Resume every job of ``jobs`` in one transaction, one change-log entry per job resumed."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        return [_resume_one(connection, job, actor, reason, now) for job in jobs]


def request_logged(
    engine: Engine,
    job: str,
    *,
    actor: str,
    reason: str | None,
    clock: Clock,
    beside_limit: bool = False,
) -> str:
    """Queue a manual run of ``job``; the request's id. The change record says when it starts
    beside its concurrency group's limit."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        request_id = request_run(connection, job, actor, reason, now, beside_limit=beside_limit)
        record_change(
            connection,
            at=now,
            actor=actor,
            action="trigger",
            job_name=job,
            before=None,
            after={"request_id": request_id, **({"beside_limit": True} if beside_limit else {})},
            reason=reason,
        )
    return request_id


def backfill_logged(
    engine: Engine,
    job: str,
    *,
    start: datetime,
    end: datetime,
    mode: str,
    occurrences: Sequence[datetime],
    concurrency: int,
    actor: str,
    reason: str | None,
    clock: Clock,
) -> str:
    """Record a backfill of ``occurrences`` of ``job``; its id. The change record names the
    range, the mode and the count."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        backfill_id = backfills.create_backfill(
            connection,
            job=job,
            start=start,
            end=end,
            mode=mode,
            reason=reason,
            actor=actor,
            concurrency=concurrency,
            occurrences=occurrences,
            now=now,
        )
        record_change(
            connection,
            at=now,
            actor=actor,
            action="backfill",
            job_name=job,
            before=None,
            after={
                "backfill_id": backfill_id,
                "from": _iso(start),
                "to": _iso(end),
                "mode": mode,
                "selected": len(occurrences),
                "concurrency": concurrency,
            },
            reason=reason,
        )
    return backfill_id


def cancel_backfill_logged(
    engine: Engine, backfill_id: str, *, actor: str, reason: str | None, clock: Clock
) -> BackfillRecord | None:
    """Stop a running backfill claiming new occurrences; the backfill after it (None: no such
    backfill). Only a change is logged."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        record = backfills.get_backfill(connection, backfill_id)
        if record is None:
            return None
        if backfills.cancel_backfill(connection, backfill_id, now):
            record_change(
                connection,
                at=now,
                actor=actor,
                action="backfill-cancel",
                job_name=record.job_name,
                before={"backfill_id": backfill_id, "state": record.state},
                after={"backfill_id": backfill_id, "state": "cancelled"},
                reason=reason,
            )
        return backfills.get_backfill(connection, backfill_id)


def _pause_one(
    connection: Connection,
    job: str,
    *,
    schedule_if_unknown: Sequence[DesiredSchedule],
    actor: str,
    reason: str,
    now: datetime,
) -> Paused:
    if schedule_if_unknown and get_schedule(connection, job) is None:
        sync_schedules(connection, schedule_if_unknown, now, prune=False)
    changed = pause_job(connection, job, actor, reason, now)
    if changed:
        record_change(
            connection,
            at=now,
            actor=actor,
            action="pause",
            job_name=job,
            before={"paused": False},
            after={"paused": True},
            reason=reason,
        )
    return Paused(changed, now, get_schedule(connection, job))


def _resume_one(
    connection: Connection, job: str, actor: str, reason: str | None, now: datetime
) -> Paused:
    before = get_schedule(connection, job)
    if before is None:
        return Paused(False, now, None)
    changed = resume_job(connection, job)
    if changed:
        record_change(
            connection,
            at=now,
            actor=actor,
            action="resume",
            job_name=job,
            before={"paused": True},
            after={"paused": False},
            reason=reason,
        )
    return Paused(changed, now, before)


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
