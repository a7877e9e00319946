"""Operators' actions as store operations: :func:`act` makes an :class:`Action`'s change and
writes its entry in the change log (``job_changes``) in one transaction, so an action is never
done without its entry nor logged without being done. Each write wakes every host at once.

A retry is a pending run for the same work at the next attempt, due at once. A cancel is
written on the running run's row, and its host cancels the run cooperatively. An
acknowledgement is only a change-log entry: whether a failure is open is derived, never stored.
A change of a job's state is written with the job's fencing token, and refused while a run of
the job is running: that run holds the state, and a value changed under it would be lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import (
    PENDING,
    PRIORITY_MANUAL,
    RUNNING,
    Acknowledged,
    BackfillRecord,
    CancelWritten,
    DesiredSchedule,
    LiveRun,
    Resolution,
    RetryWritten,
    RunRecord,
    ScheduleRecord,
    StateChange,
    StateHeld,
    new_run_id,
    work_key,
)
from jobhost.store import backfills
from jobhost.store.backfills import finish_backfills
from jobhost.store.claims import Before, before_trigger
from jobhost.store.engine import writing
from jobhost.store.failures import ACK, resolutions
from jobhost.store.ledger import delete_value, get_value, put_value, schedule_token
from jobhost.store.registry import sync_schedules
from jobhost.store.reports import get_run, get_schedule, read_runs
from jobhost.store.runtime import ChangeEntry
from jobhost.store.schema import IS_RUNNING, runs, schedules
from jobhost.store.signals import notify

__all__ = [
    "Ack",
    "Action",
    "Backfill",
    "Cancel",
    "ChangeState",
    "Paused",
    "Request",
    "Requested",
    "Retry",
    "RunAction",
    "SetPaused",
    "act",
    "pause_job",
    "request_run",
    "resume_job",
    "settle_backfill",
]

_Done = TypeVar("_Done")


class Action(Generic[_Done]):
    """An operator's action (:func:`act`): its change and its change-log entry."""

    def apply(self, connection: Connection, entry: ChangeEntry) -> _Done:
        raise NotImplementedError


def act(
    engine: Engine, action: Action[_Done], *, actor: str, reason: str | None, clock: Clock
) -> _Done:
    """Do ``action`` as ``actor`` for ``reason``, in one transaction with its entry."""
    with writing(engine, clock) as (connection, now):
        return action.apply(connection, ChangeEntry(actor, reason, now))


@dataclass(frozen=True)
class Paused:
    """What the action changed: ``changed`` is False when the job already was so."""

    job: str
    changed: bool
    at: datetime
    row: ScheduleRecord
    """The schedule row after the change (before it, for a resume: who paused it, and why)."""


@dataclass(frozen=True)
class SetPaused(Action[list[Paused | None]]):
    """Pause (``paused``) or resume every job of ``jobs``, one entry per job changed (None: a
    job never scheduled, so never paused); ``schedules`` (job → its declared schedules) for
    jobs a pause may find the store does not know yet."""

    jobs: Sequence[str]
    paused: bool
    schedules: Mapping[str, Sequence[DesiredSchedule]] = field(default_factory=dict)

    def apply(self, connection: Connection, entry: ChangeEntry) -> list[Paused | None]:
        done: list[Paused | None] = []
        now, paused = entry.at, self.paused
        for job in self.jobs:
            before = get_schedule(connection, job)
            declared = self.schedules.get(job, ())
            if before is None and paused and declared:
                sync_schedules(connection, declared, now, prune=False)
            elif before is None:
                done.append(None)
                continue
            changed = (
                pause_job(connection, job, entry.actor, entry.reason, now)
                if paused
                else resume_job(connection, job)
            )
            if changed:
                action = "pause" if paused else "resume"
                entry.log(connection, action, job, {"paused": not paused}, {"paused": paused})
            row = get_schedule(connection, job) if paused else before
            done.append(None if row is None else Paused(job, changed, now, row))
        return done


@dataclass(frozen=True)
class Requested:
    """A manual run queued, by its id (None: the job's overlap policy refused it, and nothing
    was written), and the job as the request found it (when asked for, by ``may_start``)."""

    id: str | None
    before: Before | None


@dataclass(frozen=True)
class Request(Action[Requested]):
    """Queue a manual run of ``job``, unless ``may_start`` (the job's overlap rule, given its
    live runs and whether its lease is live) refuses another run as the request finds it.
    ``beside_limit`` starts it beside its concurrency group's limit, and the entry says so."""

    job: str
    beside_limit: bool = False
    may_start: Callable[[int, bool], bool] | None = None

    def apply(self, connection: Connection, entry: ChangeEntry) -> Requested:
        before = None
        if self.may_start is not None:
            before = before_trigger(connection, self.job, entry.at)
            lease_live = before.row is not None and before.row.lease_live(entry.at)
            if not self.may_start(len(before.running), lease_live):
                return Requested(None, before)
        request_id = request_run(
            connection,
            self.job,
            entry.actor,
            entry.reason,
            entry.at,
            beside_limit=self.beside_limit,
        )
        after = {"request_id": request_id, **({"beside_limit": True} if self.beside_limit else {})}
        entry.log(connection, "trigger", self.job, None, after)
        return Requested(request_id, before)


@dataclass(frozen=True)
class Backfill(Action[str]):
    """Record a backfill of ``occurrences`` of ``job``; its id. The job gets a schedule row
    from ``schedules`` first if no host has given it one yet: a backfill's claim locks it."""

    job: str
    start: datetime
    end: datetime
    mode: str
    occurrences: Sequence[datetime]
    concurrency: int
    schedules: Sequence[DesiredSchedule]

    def apply(self, connection: Connection, entry: ChangeEntry) -> str:
        if get_schedule(connection, self.job) is None:
            sync_schedules(connection, self.schedules, entry.at, prune=False)
        backfill_id = backfills.create_backfill(
            connection,
            job=self.job,
            start=self.start,
            end=self.end,
            mode=self.mode,
            reason=entry.reason,
            actor=entry.actor,
            concurrency=self.concurrency,
            occurrences=self.occurrences,
            now=entry.at,
        )
        after = {
            "backfill_id": backfill_id,
            "from": f"{self.start:%Y-%m-%dT%H:%M:%SZ}",
            "to": f"{self.end:%Y-%m-%dT%H:%M:%SZ}",
            "mode": self.mode,
            "selected": len(self.occurrences),
            "concurrency": self.concurrency,
        }
        entry.log(connection, "backfill", self.job, None, after)
        return backfill_id


def settle_backfill(
    engine: Engine,
    backfill_id: str,
    clock: Clock,
    *,
    cancelled_by: str | None = None,
    reason: str | None = None,
) -> BackfillRecord | None:
    """The backfill (None: no such backfill), finished first when nothing of it is left pending
    or running. With ``cancelled_by``, a running backfill is stopped before that (it claims no
    new occurrence; its runs in flight go on) and the cancel logged."""
    with writing(engine, clock) as (connection, now):
        if cancelled_by is not None:
            record = backfills.get_backfill(connection, backfill_id)
            if record is not None and backfills.cancel_backfill(connection, backfill_id, now):
                ChangeEntry(cancelled_by, reason, now).log(
                    connection,
                    "backfill-cancel",
                    record.job_name,
                    {"backfill_id": backfill_id, "state": record.state},
                    {"backfill_id": backfill_id, "state": "cancelled"},
                )
        finish_backfills(connection, now, [backfill_id])
        return backfills.get_backfill(connection, backfill_id)


@dataclass(frozen=True)
class RunAction(Action[_Done]):
    """An action on run ``run_id``, which it locks first; its ``check`` is given the run (None:
    no such run) and what the action reads of it, and returns the run or raises to refuse."""

    run_id: str


@dataclass(frozen=True)
class Retry(RunAction[RetryWritten]):
    """Queue the next attempt at the run's work, due now; ``check`` is also given every attempt
    at its work."""

    check: Callable[[RunRecord | None, Sequence[RunRecord]], RunRecord]

    def apply(self, connection: Connection, entry: ChangeEntry) -> RetryWritten:
        found = get_run(connection, self.run_id, for_update=True)
        attempts = _attempts_of(connection, found) if found is not None else []
        run = self.check(found, attempts)
        attempt = max([a.attempt for a in attempts] + [run.attempt]) + 1
        new_id = new_run_id()
        connection.execute(
            runs.insert().values(
                id=new_id,
                job_name=run.job_name,
                occurrence=run.occurrence,
                attempt=attempt,
                source="retry",
                outcome=PENDING,
                reason=entry.reason,
                idempotency_key=work_key(run),
                requested_by=entry.actor,
                queued_at=entry.at,
                not_before=entry.at,
                # A backfill's run stays its backfill's: the backfill counts its attempts.
                backfill_id=run.backfill_id,
            )
        )
        notify(connection)
        before = {"run_id": run.id, "attempt": run.attempt, "outcome": run.outcome}
        entry.log(connection, "retry", run.job_name, before, {"run_id": new_id, "attempt": attempt})
        return RetryWritten(new_id, attempt, run, entry.at)


@dataclass(frozen=True)
class Cancel(RunAction[CancelWritten]):
    """Cancel the run (pending: at once; running: by asking its host); ``check`` is also given
    now."""

    check: Callable[[RunRecord | None, datetime], RunRecord]

    def apply(self, connection: Connection, entry: ChangeEntry) -> CancelWritten:
        run = self.check(get_run(connection, self.run_id, for_update=True), entry.at)
        pending = run.outcome == PENDING
        values: dict[str, object] = {
            "cancel_requested_by": entry.actor,
            "cancel_requested_at": entry.at,
            "cancel_reason": entry.reason,
        }
        if pending:  # cancelled at once, unless a host started it meanwhile
            where = [runs.c.outcome == PENDING]
            values.update(
                outcome="cancelled",
                finished_at=entry.at,
                error_type="Cancelled",
                error_message=f"cancelled before it started, by {entry.actor}: {entry.reason}",
                group_waiting_since=None,
            )
        else:  # its host is asked, unless it ended or was asked already
            where = [runs.c.outcome == RUNNING, runs.c.cancel_requested_at.is_(None)]
        query = update(runs).where(runs.c.id == run.id, *where).values(values)
        done = bool(connection.execute(query).rowcount)
        notify(connection)
        if not pending:
            state = "requested" if done else "already"
        else:
            state = "cancelled" if done else "started"
            if done and run.backfill_id is not None:
                # It may have been its backfill's last.
                finish_backfills(connection, entry.at, [run.backfill_id])
        if state in {"cancelled", "requested"}:
            before = {"run_id": run.id, "outcome": run.outcome, "host": run.host_id}
            entry.log(
                connection, "cancel", run.job_name, before, {"run_id": run.id, "cancel": state}
            )
        return CancelWritten(run, state, entry.at)


@dataclass(frozen=True)
class Ack(RunAction[Acknowledged]):
    """Acknowledge the failed run; ``check`` is also given how it was resolved already (None:
    open)."""

    check: Callable[[RunRecord | None, Resolution | None], RunRecord]

    def apply(self, connection: Connection, entry: ChangeEntry) -> Acknowledged:
        found = get_run(connection, self.run_id, for_update=True)
        resolved = resolutions(connection, [found]).get(found.id) if found is not None else None
        run = self.check(found, resolved)
        before = {"run_id": run.id, "outcome": run.outcome}
        entry.log(connection, ACK, run.job_name, before, {"run_id": run.id, "acknowledged": True})
        return Acknowledged(run, entry.at)


def _attempts_of(connection: Connection, run: RunRecord) -> list[RunRecord]:
    """Every attempt at ``run``'s occurrence (of a manual run, at its idempotency key), first
    attempt first."""
    query = select(runs).where(runs.c.job_name == run.job_name)
    if run.occurrence is not None:
        query = query.where(runs.c.occurrence == run.occurrence)
    elif run.idempotency_key is not None:
        query = query.where(runs.c.idempotency_key == run.idempotency_key)
    else:
        query = query.where(runs.c.id == run.id)
    query = query.where(runs.c.attempt > 0).order_by(runs.c.attempt, runs.c.queued_at)
    return read_runs(connection, query)


@dataclass(frozen=True)
class ChangeState(Action[StateChange]):
    """Set ``key`` of ``job_name``'s state to ``value`` (``None``: delete it); raises
    :class:`StateHeld` while a run of the job is running. Nothing that changes nothing is
    logged."""

    job_name: str
    key: str
    value: str | None

    def apply(self, connection: Connection, entry: ChangeEntry) -> StateChange:
        job_name, key, value, now = self.job_name, self.key, self.value, entry.at
        token = schedule_token(connection, job_name)
        if token is None:
            return StateChange(now, None, None, known=False, changed=False)
        # The partial index of running runs: the rows read are the job's live ones only.
        live = connection.execute(
            select(runs.c.id, runs.c.host_id, runs.c.started_at)
            .where(IS_RUNNING, runs.c.job_name == job_name)
            .order_by(runs.c.started_at)
            .limit(1)
        ).first()
        if live is not None:
            raise StateHeld(job_name, LiveRun(str(live.id), live.host_id, live.started_at))
        before = get_value(connection, job_name, key)
        if before == value:
            return StateChange(now, before, value, changed=False)
        if value is None:
            delete_value(connection, job_name, key)
        else:
            put_value(connection, job_name, key, value, token=token, now=now)
        entry.log(
            connection,
            "state-delete" if value is None else "state-set",
            job_name,
            {"key": key, "value": before},
            {"key": key, "value": value},
        )
        return StateChange(now, before, value)


def request_run(
    connection: Connection,
    job_name: str,
    requested_by: str,
    reason: str | None,
    now: datetime,
    *,
    beside_limit: bool = False,
) -> str:
    """Queue a manual run of ``job_name``, claimed before any other pending work; its id.
    ``beside_limit`` starts it even when its concurrency group is full (``trigger --now``)."""
    run_id = new_run_id()
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


def pause_job(
    connection: Connection, job_name: str, by: str, reason: str | None, now: datetime
) -> bool:
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
