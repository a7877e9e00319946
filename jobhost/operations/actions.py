"""Operator actions: one path from every surface, one change log.

``jobhost pause|resume|trigger``, the dashboard's buttons and ``/api/v1/jobs/{name}/...`` all
call these functions. Each changes the store and writes its entry in the change log
(``job_changes``: when, who, what, which job, before and after, why) in one transaction, so an
action is never done without its entry nor logged without being done. ``actor`` is whoever the
surface vouches for: the operating-system user for the CLI, the operator token's name for the
dashboard, the API token's name for the API. The log is read by ``jobhost changes``,
``GET /api/v1/changes`` and the dashboard's job page.

A new action (a retry, a cancel) is one more function here: open a transaction,
make the change through the store's operations, and ``record_change`` what it did in the
same transaction.

A paused job keeps its schedule: hosts record each occurrence it misses as ``missed`` with
reason ``paused``; on resume its misfire policy decides what of the paused time runs. A job the
store does not know yet is scheduled first (the catalog is synced, as a starting host would),
so it can be paused before any host has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.rules.desired import desired_schedules
from jobhost.store import Clock, ScheduleRecord, SystemClock, backfills, database_now
from jobhost.store.operations import get_schedule, pause_job, request_run, resume_job
from jobhost.store.registry import sync_schedules
from jobhost.store.runtime import record_change

__all__ = [
    "PauseResult",
    "cancel_backfill",
    "pause",
    "request_trigger",
    "resume",
    "start_backfill",
]


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
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        if get_schedule(connection, job) is None and job in catalog.jobs:
            sync_schedules(
                connection, desired_schedules({job: catalog.jobs[job]}), now, prune=False
            )
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
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
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


def start_backfill(
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
    clock: Clock | None = None,
) -> str:
    """Record a backfill of ``occurrences`` of ``job`` for the hosts (or the command's own
    process) to run; its id. The change record names the range, the mode and the count."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
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


def cancel_backfill(
    engine: Engine,
    backfill_id: str,
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> backfills.BackfillRecord | None:
    """Stop a running backfill claiming new occurrences (its runs in flight finish); the
    backfill after it (None: no such backfill). Only a change is logged."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
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
