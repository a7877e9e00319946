"""Operators' actions as store operations: each makes its change and writes its entry in the
change log (``job_changes``) in one transaction the store opens, so an action is never done
without its entry nor logged without being done.

``jobhost.operations.actions`` is the one caller; a new action (a backfill, a retry, a cancel) is
one more function here and one there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.store import backfills
from jobhost.store.clock import Clock, database_now
from jobhost.store.operations import get_schedule, pause_job, request_run, resume_job
from jobhost.store.records import ScheduleRecord
from jobhost.store.registry import DesiredSchedule, sync_schedules
from jobhost.store.runtime import record_change

__all__ = [
    "Paused",
    "backfill_logged",
    "cancel_backfill_logged",
    "pause_logged",
    "request_logged",
    "resume_logged",
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
    with engine.begin() as connection:
        now = database_now(connection, clock)
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


def resume_logged(
    engine: Engine, job: str, *, actor: str, reason: str | None, clock: Clock
) -> Paused:
    """Resume ``job``; ``row`` is None when the store has never scheduled it."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
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
) -> backfills.BackfillRecord | None:
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


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
