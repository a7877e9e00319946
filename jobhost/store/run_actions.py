"""What an operator writes about one run: a retry of it, a request to cancel it.

A retry is a pending run row for the same occurrence and idempotency key at the next attempt,
due at once: hosts (and an in-process command) claim it as they claim every retry. A cancel is
written on the running run's row; its host sees it on its next turn, after the signal both
writes send, and cancels the run cooperatively. Both wake every host (see :func:`notify`).

:func:`retry_logged` and :func:`cancel_logged` are the operations ``jobhost.operations`` calls:
each locks the run, lets the caller's ``check`` refuse (by raising: nothing is written), then
writes the change and its change-log entry (``job_changes``) in the one transaction it opens.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import PENDING, RUNNING, RunRecord, new_run_id, work_key
from jobhost.store.backfills import finish_backfills
from jobhost.store.clock import database_now
from jobhost.store.runtime import record_change
from jobhost.store.schema import runs
from jobhost.store.signals import notify

__all__ = [
    "CancelWritten",
    "RetryWritten",
    "attempts_of",
    "cancel_logged",
    "cancel_requests",
    "finish_pending",
    "lock_run",
    "queue_retry",
    "request_cancel",
    "retry_logged",
]


@dataclass(frozen=True)
class RetryWritten:
    """The retry queued: ``run_id`` the new run at ``attempt``, ``retry_of`` the run retried."""

    run_id: str
    attempt: int
    retry_of: RunRecord
    at: datetime


def retry_logged(
    engine: Engine,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock,
    check: Callable[[RunRecord | None, Sequence[RunRecord]], RunRecord],
) -> RetryWritten:
    """Queue the next attempt at run ``run_id``'s work, due now, and log it. ``check`` is
    given the locked run (None: no such run) and every attempt at its work; it returns the run
    or raises to refuse."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        found = lock_run(connection, run_id)
        attempts = attempts_of(connection, found) if found is not None else []
        run = check(found, attempts)
        attempt = max([a.attempt for a in attempts] + [run.attempt]) + 1
        new_id = queue_retry(connection, run, attempt=attempt, actor=actor, reason=reason, now=now)
        record_change(
            connection,
            at=now,
            actor=actor,
            action="retry",
            job_name=run.job_name,
            before={"run_id": run.id, "attempt": run.attempt, "outcome": run.outcome},
            after={"run_id": new_id, "attempt": attempt},
            reason=reason,
        )
    return RetryWritten(new_id, attempt, run, now)


@dataclass(frozen=True)
class CancelWritten:
    """``state``: ``requested`` (written on the running run), ``already`` (asked before),
    ``cancelled`` (pending: recorded cancelled) or ``started`` (a pending run started meanwhile:
    nothing written)."""

    run: RunRecord
    state: str
    at: datetime


def cancel_logged(
    engine: Engine,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock,
    check: Callable[[RunRecord | None, datetime], RunRecord],
) -> CancelWritten:
    """Cancel run ``run_id`` (pending: at once; running: by asking its host) and log it.
    ``check`` is given the locked run (None: no such run) and now; it returns the run or raises
    to refuse."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        run = check(lock_run(connection, run_id), now)
        if run.outcome == PENDING:
            done = finish_pending(connection, run.id, actor=actor, reason=reason, now=now)
            state = "cancelled" if done else "started"
            if done and run.backfill_id is not None:
                finish_backfills(connection, now, [run.backfill_id])  # it may have been its last
        elif request_cancel(connection, run.id, actor=actor, reason=reason, now=now):
            state = "requested"
        else:
            state = "already"
        if state in {"cancelled", "requested"}:
            record_change(
                connection,
                at=now,
                actor=actor,
                action="cancel",
                job_name=run.job_name,
                before={"run_id": run.id, "outcome": run.outcome, "host": run.host_id},
                after={"run_id": run.id, "cancel": state},
                reason=reason,
            )
    return CancelWritten(run, state, now)


def lock_run(connection: Connection, run_id: str) -> RunRecord | None:
    """The run, locked against a concurrent operator action until the transaction ends."""
    query = select(runs).where(runs.c.id == run_id)
    if connection.dialect.name == "postgresql":
        query = query.with_for_update()
    row = connection.execute(query).mappings().first()
    return RunRecord.from_row(row) if row is not None else None


def attempts_of(connection: Connection, run: RunRecord) -> list[RunRecord]:
    """Every attempt at ``run``'s occurrence (of a manual run, which has none, at its
    idempotency key), first attempt first. Several pieces of work may share an occurrence (a
    backfill's runs): :func:`work_key` tells them apart."""
    query = select(runs).where(runs.c.job_name == run.job_name)
    if run.occurrence is not None:
        query = query.where(runs.c.occurrence == run.occurrence)
    elif run.idempotency_key is not None:
        query = query.where(runs.c.idempotency_key == run.idempotency_key)
    else:
        query = query.where(runs.c.id == run.id)
    query = query.where(runs.c.attempt > 0).order_by(runs.c.attempt, runs.c.queued_at)
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def queue_retry(
    connection: Connection,
    run: RunRecord,
    *,
    attempt: int,
    actor: str,
    reason: str,
    now: datetime,
) -> str:
    """Queue attempt ``attempt`` at ``run``'s work, due now; the new run's id."""
    run_id = new_run_id()
    connection.execute(
        runs.insert().values(
            id=run_id,
            job_name=run.job_name,
            occurrence=run.occurrence,
            attempt=attempt,
            source="retry",
            outcome=PENDING,
            reason=reason,
            idempotency_key=work_key(run),
            requested_by=actor,
            queued_at=now,
            not_before=now,
            # A backfill's run stays its backfill's: the backfill counts its attempts.
            backfill_id=run.backfill_id,
        )
    )
    notify(connection)
    return run_id


def request_cancel(
    connection: Connection, run_id: str, *, actor: str, reason: str, now: datetime
) -> bool:
    """Ask the host of the running run to cancel it; False when it is no longer running or
    a cancel was asked for already (the first request stands)."""
    result = connection.execute(
        update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.outcome == RUNNING,
            runs.c.cancel_requested_at.is_(None),
        )
        .values(cancel_requested_by=actor, cancel_requested_at=now, cancel_reason=reason)
    )
    notify(connection)
    return bool(result.rowcount)


def cancel_requests(connection: Connection, run_ids: Collection[str]) -> dict[str, str]:
    """Of ``run_ids`` (the runs a host holds), those an operator asked to cancel: run id → the
    reason the executor is given (who asked, and why)."""
    if not run_ids:
        return {}
    query = select(runs.c.id, runs.c.cancel_requested_by, runs.c.cancel_reason).where(
        runs.c.id.in_(sorted(run_ids)),
        runs.c.cancel_requested_at.is_not(None),
        runs.c.outcome == RUNNING,
    )
    return {
        run_id: f"by {by}: {why}" if why else f"by {by}"
        for run_id, by, why in connection.execute(query)
    }


def finish_pending(
    connection: Connection, run_id: str, *, actor: str, reason: str, now: datetime
) -> bool:
    """Record a run that has not started (a queued retry or manual run) cancelled at once;
    False when a host started it meanwhile."""
    result = connection.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.outcome == PENDING)
        .values(
            outcome="cancelled",
            finished_at=now,
            error_type="Cancelled",
            error_message=f"cancelled before it started, by {actor}: {reason}",
            cancel_requested_by=actor,
            cancel_requested_at=now,
            cancel_reason=reason,
            group_waiting_since=None,
        )
    )
    notify(connection)
    return bool(result.rowcount)
