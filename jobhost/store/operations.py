"""What operators' commands write: manual runs, pause and resume.

Each write wakes every host at once (NOTIFY on PostgreSQL, the signal counter on SQLite).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, PRIORITY_MANUAL, ScheduleRecord
from jobhost.store.schema import runs, schedules
from jobhost.store.signals import notify

__all__ = ["get_schedule", "pause_job", "request_run", "resume_job"]


def request_run(
    connection: Connection,
    job_name: str,
    requested_by: str,
    reason: str | None,
    now: datetime,
    *,
    beside_limit: bool = False,
) -> str:
    """Queue a manual run of ``job_name`` as a pending run claimed before any other pending
    work; a live host picks it up at once. The run's id, which the request is known by.

    ``beside_limit`` starts it even when its concurrency group is full (``trigger --now``).
    """
    run_id = uuid.uuid4().hex
    connection.execute(
        runs.insert().values(
            id=run_id,
            job_name=job_name,
            occurrence=None,
            attempt=1,
            source="manual",
            outcome=PENDING,
            idempotency_key=f"{job_name}:manual:{run_id}",
            requested_by=requested_by,
            reason=reason,
            queued_at=now,
            # No bound: due at once for every host, whatever its clock says.
            not_before=None,
            priority=PRIORITY_MANUAL,
            beside_limit=beside_limit,
        )
    )
    notify(connection)
    return run_id


def get_schedule(connection: Connection, job_name: str) -> ScheduleRecord | None:
    row = (
        connection.execute(select(schedules).where(schedules.c.job_name == job_name))
        .mappings()
        .first()
    )
    return ScheduleRecord.from_row(row) if row is not None else None


def pause_job(connection: Connection, job_name: str, by: str, reason: str, now: datetime) -> bool:
    """Pause the job for every replica; False when it was already paused."""
    result = connection.execute(
        update(schedules)
        .where(schedules.c.job_name == job_name, schedules.c.paused.is_(False))
        .values(paused=True, paused_by=by, paused_at=now, paused_reason=reason)
    )
    notify(connection)
    return bool(result.rowcount)


def resume_job(connection: Connection, job_name: str) -> bool:
    """Resume the job; its misfire policy then decides what of the paused time runs."""
    result = connection.execute(
        update(schedules)
        .where(schedules.c.job_name == job_name, schedules.c.paused.is_(True))
        .values(
            paused=False,
            paused_by=None,
            paused_at=None,
            paused_reason=None,
            # Its place: the misfire policy decides at once what runs of what it missed.
            due_at=schedules.c.next_occurrence,
        )
    )
    notify(connection)
    return bool(result.rowcount)
