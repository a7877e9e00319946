"""Claiming work: due occurrences, manual run requests and pending retries.

A claim happens inside one transaction: lock the schedule row (skipping rows another replica
holds on PostgreSQL; SQLite transactions hold the write lock), take the job's lease with a
fencing token that only grows, insert the run row, and advance the schedule only if it still
holds what was read. The run row's unique constraint on (job, occurrence, attempt) is the last
word: if two replicas ever reach one occurrence, one insert wins and the other gets
:class:`OccurrenceTakenError` and rolls back.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from jobhost.store._sql import insert_ignoring_duplicates, locked, violated_constraint
from jobhost.store.records import PENDING, RUNNING, RequestRecord, RunRecord, ScheduleRecord
from jobhost.store.schema import RUN_OCCURRENCE_CONSTRAINT, run_requests, runs, schedules

__all__ = [
    "Claim",
    "OccurrenceTakenError",
    "activate_retry",
    "advance_schedule",
    "claim_pending_requests",
    "claim_pending_retries",
    "due_job_names",
    "live_runs",
    "lock_schedule",
    "new_run_id",
    "record_not_run",
    "refuse_request",
    "start_run",
    "take_lease",
]

_RUN_COLUMNS = ("job_name", "occurrence", "attempt")


class OccurrenceTakenError(Exception):
    """Another replica already holds this occurrence's run row."""

    def __init__(self, job: str, occurrence: datetime | None, attempt: int) -> None:
        super().__init__(f"job {job!r}: occurrence {occurrence} attempt {attempt} already taken")


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


def due_job_names(connection: Connection, now: datetime) -> list[str]:
    """Jobs with an occurrence at or before ``now`` (paused ones too: they record misses)."""
    query = (
        select(schedules.c.job_name)
        .where(
            schedules.c.next_occurrence <= now,
            schedules.c.enabled.is_(True),
            schedules.c.orphaned.is_(False),
        )
        .order_by(schedules.c.next_occurrence)
    )
    return list(connection.execute(query).scalars())


def lock_schedule(connection: Connection, job_name: str) -> ScheduleRecord | None:
    """The job's schedule row, locked for this transaction; None if another replica holds it."""
    query = locked(connection, select(schedules).where(schedules.c.job_name == job_name))
    row = connection.execute(query).mappings().first()
    return ScheduleRecord.from_row(row) if row is not None else None


def live_runs(connection: Connection, job_name: str, now: datetime) -> list[RunRecord]:
    """Runs of the job whose lease has not expired."""
    query = select(runs).where(
        runs.c.job_name == job_name, runs.c.outcome == RUNNING, runs.c.lease_expires_at >= now
    )
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def take_lease(
    connection: Connection,
    row: ScheduleRecord,
    host_id: str,
    run_id: str,
    until: datetime,
) -> int:
    """Give the job's lease to ``run_id``; return its fencing token, one above the row's.

    ``row`` must have been read under :func:`lock_schedule` in this transaction, so no other
    claim can hand out the same token.
    """
    token = row.fencing_token + 1
    connection.execute(
        update(schedules)
        .where(schedules.c.job_name == row.job_name)
        .values(
            fencing_token=token,
            lease_owner=host_id,
            lease_expires_at=until,
            lease_run_id=run_id,
        )
    )
    return token


def start_run(
    connection: Connection,
    *,
    run_id: str,
    job_name: str,
    occurrence: datetime | None,
    attempt: int,
    source: str,
    host_id: str,
    fencing_token: int,
    idempotency_key: str,
    now: datetime,
    lease_until: datetime,
    requested_by: str | None = None,
    reason: str | None = None,
    queued_at: datetime | None = None,
) -> Claim:
    """Insert the run row in state ``running``; raise :class:`OccurrenceTakenError` on a race.

    ``queued_at`` is when the run was asked for (a manual request); by default, ``now``.
    """
    try:
        with connection.begin_nested():
            connection.execute(
                runs.insert().values(
                    id=run_id,
                    job_name=job_name,
                    occurrence=occurrence,
                    attempt=attempt,
                    source=source,
                    outcome=RUNNING,
                    host_id=host_id,
                    fencing_token=fencing_token,
                    idempotency_key=idempotency_key,
                    requested_by=requested_by,
                    reason=reason,
                    queued_at=queued_at or now,
                    started_at=now,
                    lease_expires_at=lease_until,
                )
            )
    except IntegrityError as error:
        name = violated_constraint(error)
        if name in {RUN_OCCURRENCE_CONSTRAINT, "runs.job_name, runs.occurrence, runs.attempt"}:
            raise OccurrenceTakenError(job_name, occurrence, attempt) from error
        raise
    return Claim(
        run_id=run_id,
        job_name=job_name,
        occurrence=occurrence,
        attempt=attempt,
        source=source,
        fencing_token=fencing_token,
        idempotency_key=idempotency_key,
        started_at=now,
        requested_by=requested_by,
        reason=reason,
    )


def record_not_run(
    connection: Connection,
    job_name: str,
    items: Sequence[tuple[datetime, str, str]],
    now: datetime,
    host_id: str,
) -> int:
    """Record (occurrence, outcome, reason) rows for occurrences that will not run."""
    rows = [
        {
            "id": new_run_id(),
            "job_name": job_name,
            "occurrence": occurrence,
            "attempt": 0,
            "source": "schedule",
            "outcome": outcome,
            "reason": reason,
            "host_id": host_id,
            "queued_at": now,
            "finished_at": now,
        }
        for occurrence, outcome, reason in items
    ]
    return insert_ignoring_duplicates(connection, runs, rows, _RUN_COLUMNS)


def advance_schedule(
    connection: Connection,
    row: ScheduleRecord,
    next_occurrence: datetime | None,
    missed_through: datetime | None,
) -> bool:
    """Move the job's next occurrence on, if nobody moved it since ``row`` was read."""
    result = connection.execute(
        update(schedules)
        .where(
            schedules.c.job_name == row.job_name,
            schedules.c.next_occurrence == row.next_occurrence,
        )
        .values(next_occurrence=next_occurrence, missed_through=missed_through)
    )
    return bool(result.rowcount)


def claim_pending_requests(
    connection: Connection, host_id: str, limit: int, request_id: str | None = None
) -> list[RequestRecord]:
    """Take up to ``limit`` manual run requests (only ``request_id``, when given), oldest first;
    the caller starts or refuses each one."""
    query = select(run_requests).where(run_requests.c.status == PENDING)
    if request_id is not None:
        query = query.where(run_requests.c.id == request_id)
    query = locked(connection, query.order_by(run_requests.c.requested_at).limit(limit))
    taken = [RequestRecord.from_row(r) for r in connection.execute(query).mappings()]
    if taken:
        connection.execute(
            update(run_requests)
            .where(run_requests.c.id.in_([r.id for r in taken]))
            .values(status="claimed", claimed_by=host_id)
        )
    return taken


def refuse_request(connection: Connection, request_id: str, message: str) -> None:
    connection.execute(
        update(run_requests)
        .where(run_requests.c.id == request_id)
        .values(status="refused", message=message)
    )


def claim_pending_retries(connection: Connection, now: datetime, limit: int) -> list[RunRecord]:
    """Retries whose backoff has passed, locked for this transaction."""
    query = locked(
        connection,
        select(runs)
        .where(runs.c.outcome == PENDING, runs.c.not_before <= now)
        .order_by(runs.c.not_before)
        .limit(limit),
    )
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def activate_retry(
    connection: Connection,
    run: RunRecord,
    *,
    host_id: str,
    fencing_token: int,
    now: datetime,
    lease_until: datetime,
) -> Claim | None:
    """Turn a pending retry into this host's running run; None if another host took it."""
    result = connection.execute(
        update(runs)
        .where(runs.c.id == run.id, runs.c.outcome == PENDING)
        .values(
            outcome=RUNNING,
            host_id=host_id,
            fencing_token=fencing_token,
            started_at=now,
            lease_expires_at=lease_until,
        )
    )
    if not result.rowcount:
        return None
    return Claim(
        run_id=run.id,
        job_name=run.job_name,
        occurrence=run.occurrence,
        attempt=run.attempt,
        source=run.source,
        fencing_token=fencing_token,
        idempotency_key=run.idempotency_key or f"{run.job_name}:{run.id}",
        started_at=now,
        requested_by=run.requested_by,
        reason=run.reason,
    )


def new_run_id() -> str:
    return uuid.uuid4().hex
