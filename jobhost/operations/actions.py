"""Operator actions: one path from every surface, one change log.

``jobhost pause|resume|trigger``, the dashboard's buttons and ``/api/v1/jobs/{name}/...`` all
call these functions. Each changes the store and writes its entry in the change log
(``job_changes``: when, who, what, which job, before and after, why) in one transaction, so an
action is never done without its entry nor logged without being done. ``actor`` is whoever the
surface vouches for: the operating-system user for the CLI, the operator token's name for the
dashboard, the API token's name for the API. The log is read by ``jobhost changes``,
``GET /api/v1/changes`` and the dashboard's job page.

A new action (a retry, a cancel) is one more function here over one more store
operation in ``jobhost.store.actions``, which makes the change and records it in the
transaction it opens itself.

A paused job keeps its schedule: hosts record each occurrence it misses as ``missed`` with
reason ``paused``; on resume its misfire policy decides what of the paused time runs. A job the
store does not know yet is scheduled first (the catalog is synced, as a starting host would),
so it can be paused before any host has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jobhost.catalog import Catalog
from jobhost.rules.desired import desired_schedules
from jobhost.store import Clock, Engine, ScheduleRecord, SystemClock, backfills
from jobhost.store.actions import (
    backfill_logged,
    cancel_backfill_logged,
    pause_logged,
    request_logged,
    resume_logged,
)

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
    declared = desired_schedules({job: catalog.jobs[job]}) if job in catalog.jobs else []
    done = pause_logged(
        engine,
        job,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        schedule_if_unknown=declared,
    )
    assert done.row is not None, f"job {job} has a schedule row once synced"
    return PauseResult(job, done.changed, done.at, done.row)


def resume(
    engine: Engine,
    job: str,
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> PauseResult | None:
    """Resume ``job``; None when the store has never scheduled it (so it was not paused)."""
    done = resume_logged(engine, job, actor=actor, reason=reason, clock=clock or SystemClock())
    if done.row is None:
        return None
    return PauseResult(job, done.changed, done.at, done.row)


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
    return request_logged(
        engine,
        job,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        beside_limit=beside_limit,
    )


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
    return backfill_logged(
        engine,
        job,
        start=start,
        end=end,
        mode=mode,
        occurrences=occurrences,
        concurrency=concurrency,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
    )


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
    return cancel_backfill_logged(
        engine, backfill_id, actor=actor, reason=reason, clock=clock or SystemClock()
    )
