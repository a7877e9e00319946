"""Operator actions: one path from every surface, one change log.

``jobhost pause|resume|trigger``, the dashboard's buttons and ``/api/v1/jobs/{name}/...`` all
call these functions. Each changes the store and writes its entry in the change log
(``job_changes``: when, who, what, which job, before and after, why) in one transaction, so an
action is never done without its entry nor logged without being done. ``actor`` is whoever the
surface vouches for: the operating-system user for the CLI, the operator token's name for the
dashboard, the API token's name for the API. The log is read by ``jobhost changes``,
``GET /api/v1/changes`` and the dashboard's job page.

A new action is one more function here: open a transaction, make the change through the
store's operations, and ``record_change`` what it did in the same transaction. Besides pause,
resume and trigger: ``retry_run`` (``jobhost retry RUN_ID``) queues the next attempt at one
run's occurrence, ``cancel_run`` (``jobhost cancel RUN_ID``) asks the run's host to cancel it,
and ``pause_jobs`` / ``resume_jobs`` act on many jobs with one reason; each job gets its own
entry. An action that cannot be done raises :class:`ActionRefused`, whose message names the
run or job and the fix.

A paused job keeps its schedule: hosts record each occurrence it misses as ``missed`` with
reason ``paused``; on resume its misfire policy decides what of the paused time runs. A job the
store does not know yet is scheduled first (the catalog is synced, as a starting host would),
so it can be paused before any host has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from sqlalchemy.engine import Connection, Engine

from jobhost.catalog import Catalog
from jobhost.rules.desired import desired_schedules
from jobhost.store import Clock, ScheduleRecord, SystemClock, database_now
from jobhost.store.operations import get_schedule, pause_job, request_run, resume_job
from jobhost.store.records import PENDING, RUNNING, RunRecord
from jobhost.store.registry import sync_schedules
from jobhost.store.run_actions import (
    attempts_of,
    finish_pending,
    lock_run,
    queue_retry,
    request_cancel,
)
from jobhost.store.runtime import record_change

__all__ = [
    "RETRYABLE",
    "ActionRefused",
    "CancelAsked",
    "PauseResult",
    "RetryQueued",
    "cancel_run",
    "jobs_matching",
    "pause",
    "pause_jobs",
    "request_trigger",
    "resume",
    "resume_jobs",
    "retry_run",
]

RETRYABLE = frozenset({"failed", "timed_out", "abandoned", "cancelled"})
"""Outcomes an operator may retry: the attempt did not do its work."""


class ActionRefused(Exception):
    """An operator action that cannot be done; the message names the run or job and the fix.
    ``unknown`` is True when the run does not exist (the API answers 404, not 409)."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


@dataclass(frozen=True)
class PauseResult:
    """What the action changed: ``changed`` is False when the job already was so."""

    job: str
    changed: bool
    at: datetime
    row: ScheduleRecord
    """The schedule row after the change (before it, for a resume: who paused it, and why)."""


def pause(
    engine: Engine,
    catalog: Catalog,
    job: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> PauseResult:
    """Pause ``job`` (a name the catalog or the store knows) for every replica."""
    (done,) = pause_jobs(engine, catalog, [job], actor=actor, reason=reason, clock=clock)
    return done


def jobs_matching(catalog: Catalog, modules: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The catalog's jobs of any of ``modules`` or whose name matches any of ``patterns``
    (shell-style: ``billing.*``), by name: what a bulk pause or resume acts on."""
    return sorted(
        name
        for name, spec in catalog.jobs.items()
        if spec.module in modules or any(fnmatchcase(name, p) for p in patterns)
    )


def pause_jobs(
    engine: Engine,
    catalog: Catalog,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> list[PauseResult]:
    """Pause every job of ``jobs`` in one transaction, one change-log entry per job paused."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        return [
            _pause_one(connection, catalog=catalog, job=job, actor=actor, reason=reason, now=now)
            for job in jobs
        ]


def _pause_one(
    connection: Connection, *, catalog: Catalog, job: str, actor: str, reason: str, now: datetime
) -> PauseResult:
    if get_schedule(connection, job) is None and job in catalog.jobs:
        sync_schedules(connection, desired_schedules({job: catalog.jobs[job]}), now, prune=False)
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
    row = get_schedule(connection, job)
    assert row is not None, f"job {job} has a schedule row once synced"
    return PauseResult(job, changed, now, row)


def resume(
    engine: Engine,
    job: str,
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> PauseResult | None:
    """Resume ``job``; None when the store has never scheduled it (so it was not paused)."""
    (done,) = resume_jobs(engine, [job], actor=actor, reason=reason, clock=clock)
    return done


def resume_jobs(
    engine: Engine,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> list[PauseResult | None]:
    """Resume every job of ``jobs`` in one transaction (None for a job never scheduled)."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        return [_resume_one(connection, job, actor, reason, now) for job in jobs]


def _resume_one(
    connection: Connection, job: str, actor: str, reason: str | None, now: datetime
) -> PauseResult | None:
    before = get_schedule(connection, job)
    if before is None:
        return None
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
    return PauseResult(job, changed, now, before)


def request_trigger(
    engine: Engine,
    job: str,
    *,
    actor: str,
    reason: str | None,
    clock: Clock | None = None,
    beside_limit: bool = False,
) -> str:
    """Queue a manual run of ``job`` for the first live host (or the command's own process);
    the request's id. ``beside_limit`` starts it even in a full concurrency group (``--now``),
    and the change record says so."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
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


@dataclass(frozen=True)
class RetryQueued:
    """The next attempt at a run's work, queued: ``run_id`` is the new run."""

    run_id: str
    attempt: int
    retry_of: RunRecord
    at: datetime


def retry_run(
    engine: Engine,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> RetryQueued:
    """Queue the next attempt at run ``run_id``'s occurrence (its idempotency key too), due now:
    a host claims it as it claims every retry. Refused for a run still running, one whose work
    succeeded, and one never attempted."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        run = lock_run(connection, run_id)
        if run is None:
            raise ActionRefused(_no_run(run_id), unknown=True)
        attempts = attempts_of(connection, run)
        _check_retry(run, attempts)
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
    return RetryQueued(new_id, attempt, run, now)


@dataclass(frozen=True)
class CancelAsked:
    """A cancel asked for: ``run`` as it was; ``state`` is ``requested`` (its host cancels it
    on its next turn), ``already`` (someone asked first: see ``run.cancel_requested_by``) or
    ``cancelled`` (it had not started: it is recorded cancelled at once)."""

    run: RunRecord
    state: str
    at: datetime


def cancel_run(
    engine: Engine,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> CancelAsked:
    """Ask the host running ``run_id`` to cancel it (cooperatively: the executor's
    cancellation is set, and the run is recorded ``cancelled``). A run not yet started is
    recorded cancelled at once. Refused for a finished run and for one whose host is gone."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        run = lock_run(connection, run_id)
        if run is None:
            raise ActionRefused(_no_run(run_id), unknown=True)
        if run.outcome == PENDING:
            if not finish_pending(connection, run.id, actor=actor, reason=reason, now=now):
                raise ActionRefused(
                    f"run {run.id} of {run.job_name} started meanwhile; cancel again"
                )
            state = "cancelled"
        elif run.outcome != RUNNING:
            raise ActionRefused(
                f"run {run.id} of {run.job_name} already ended {run.outcome}"
                f"{_at(run.finished_at)}: there is nothing to cancel"
            )
        elif run.lease_expires_at is None or run.lease_expires_at < now:
            raise ActionRefused(
                f"run {run.id} of {run.job_name} belongs to host {run.host_id}, which is not "
                f"alive (its lease expired{_at(run.lease_expires_at)}): no process runs it to "
                "cancel. A live host records it abandoned when it sees the expired lease: "
                f"start one (`jobhost run`) if none runs, then `jobhost retry {run.id} --reason "
                "TEXT` if its work should run again"
            )
        elif request_cancel(connection, run.id, actor=actor, reason=reason, now=now):
            state = "requested"
        else:
            state = "already"
        if state != "already":
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
    return CancelAsked(run, state, now)


def _check_retry(run: RunRecord, attempts: list[RunRecord]) -> None:
    name = f"run {run.id} of {run.job_name}"
    if run.outcome in {RUNNING, PENDING}:
        raise ActionRefused(
            f"{name} is still {run.outcome}: wait for its outcome, or stop it with "
            f"`jobhost cancel {run.id} --reason TEXT` and retry it then"
        )
    if run.outcome == "succeeded":
        raise ActionRefused(
            f"{name} succeeded: there is nothing to retry (`jobhost trigger {run.job_name}` "
            "runs the job again)"
        )
    if run.outcome not in RETRYABLE:
        raise ActionRefused(
            f"{name} is a {run.outcome} occurrence that never ran: `jobhost backfill "
            f"{run.job_name} --from TIME --to TIME` runs it"
        )
    for other in attempts:
        if other.id == run.id:
            continue
        if other.outcome in {RUNNING, PENDING}:
            raise ActionRefused(
                f"attempt {other.attempt} at the same work of {run.job_name} (run {other.id}) "
                f"is {other.outcome}: a retry now would run it twice; wait for its outcome"
            )
        if other.outcome == "succeeded":
            raise ActionRefused(
                f"attempt {other.attempt} at the same work of {run.job_name} (run {other.id}) "
                f"succeeded: there is nothing to retry (`jobhost trigger {run.job_name}` runs "
                "the job again)"
            )


def _no_run(run_id: str) -> str:
    return f"no run {run_id!r}: `jobhost history NAME` lists a job's runs with their ids"


def _at(when: datetime | None) -> str:
    return f" at {when.strftime('%Y-%m-%d %H:%M:%SZ')}" if when is not None else ""
