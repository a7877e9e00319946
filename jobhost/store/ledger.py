"""The run ledger after a claim: leases renewed, runs finished, retries queued, dead runs found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from jobhost.store.records import PENDING, RUNNING, RunRecord
from jobhost.store.schema import runs, schedules

__all__ = [
    "Finish",
    "abandon_expired_runs",
    "finish_run",
    "queue_retry",
    "release_expired_leases",
    "renew_leases",
]


@dataclass(frozen=True, slots=True)
class Finish:
    """How a run ended, as the envelope decided it."""

    outcome: str
    finished_at: datetime
    error_type: str | None = None
    error_message: str | None = None
    trace_id: str | None = None


def renew_leases(
    connection: Connection, host_id: str, run_ids: Sequence[str], until: datetime
) -> set[str]:
    """Extend the leases of this host's running runs; return the ids it no longer holds."""
    if not run_ids:
        return set()
    renewed = set(
        connection.execute(
            update(runs)
            .where(
                runs.c.id.in_(list(run_ids)), runs.c.host_id == host_id, runs.c.outcome == RUNNING
            )
            .values(lease_expires_at=until)
            .returning(runs.c.id)
        ).scalars()
    )
    connection.execute(
        update(schedules)
        .where(schedules.c.lease_owner == host_id, schedules.c.lease_run_id.in_(list(renewed)))
        .values(lease_expires_at=until)
    )
    return set(run_ids) - renewed


def finish_run(
    connection: Connection, run_id: str, job_name: str, host_id: str, end: Finish
) -> bool:
    """Record the outcome and release the job's lease if this run still holds it.

    Returns False when the run was no longer this host's (another replica recorded it abandoned
    after its lease expired): the ledger keeps that verdict.
    """
    result = connection.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.host_id == host_id, runs.c.outcome == RUNNING)
        .values(
            outcome=end.outcome,
            finished_at=end.finished_at,
            lease_expires_at=None,
            error_type=end.error_type,
            error_message=end.error_message,
            trace_id=end.trace_id,
        )
    )
    if not result.rowcount:
        return False
    summary = {
        "last_run_id": run_id,
        "last_outcome": end.outcome,
        "last_finished_at": end.finished_at,
        "last_error": end.error_message,
    }
    started = connection.execute(select(runs.c.started_at).where(runs.c.id == run_id)).scalar()
    summary["last_started_at"] = started
    if end.outcome == "succeeded":
        summary["last_success_at"] = end.finished_at
    connection.execute(update(schedules).where(schedules.c.job_name == job_name).values(**summary))
    connection.execute(
        update(schedules)
        .where(schedules.c.job_name == job_name, schedules.c.lease_run_id == run_id)
        .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
    )
    return True


def queue_retry(
    connection: Connection,
    failed: RunRecord,
    *,
    run_id: str,
    now: datetime,
    not_before: datetime,
) -> None:
    """Queue the next attempt of ``failed``; any replica takes it once ``not_before`` passes."""
    connection.execute(
        runs.insert().values(
            id=run_id,
            job_name=failed.job_name,
            occurrence=failed.occurrence,
            attempt=failed.attempt + 1,
            source="retry",
            outcome=PENDING,
            idempotency_key=failed.idempotency_key,
            requested_by=failed.requested_by,
            reason=failed.reason,
            queued_at=now,
            not_before=not_before,
        )
    )


def abandon_expired_runs(connection: Connection, now: datetime) -> list[RunRecord]:
    """Record ``abandoned`` every running run whose lease expired, and free the job's lease.

    Called by every replica each tick; the conditional update makes exactly one of them the one
    that records each run.
    """
    expired = [
        RunRecord.from_row(r)
        for r in connection.execute(
            select(runs).where(runs.c.outcome == RUNNING, runs.c.lease_expires_at < now)
        ).mappings()
    ]
    recorded: list[RunRecord] = []
    for run in expired:
        message = (
            f"lease expired at {run.lease_expires_at:%Y-%m-%dT%H:%M:%SZ}: "
            f"host {run.host_id} stopped renewing it"
        )
        result = connection.execute(
            update(runs)
            .where(runs.c.id == run.id, runs.c.outcome == RUNNING, runs.c.lease_expires_at < now)
            .values(outcome="abandoned", finished_at=now, error_message=message)
        )
        if not result.rowcount:
            continue
        recorded.append(run)
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == run.job_name)
            .values(
                last_run_id=run.id,
                last_outcome="abandoned",
                last_started_at=run.started_at,
                last_finished_at=now,
                last_error=message,
            )
        )
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == run.job_name, schedules.c.lease_run_id == run.id)
            .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
        )
    return recorded


def release_expired_leases(connection: Connection, now: datetime) -> int:
    """Free job leases that expired with no running run behind them."""
    running = select(runs.c.id).where(runs.c.outcome == RUNNING)
    result = connection.execute(
        update(schedules)
        .where(
            schedules.c.lease_expires_at < now,
            schedules.c.lease_run_id.not_in(running),
        )
        .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
    )
    return int(result.rowcount or 0)
