"""Pausing and resuming a job: one row in the store, seen by every replica at once.

A paused job keeps its schedule: hosts record each occurrence it misses as ``missed`` with
reason ``paused``; on resume its misfire policy decides what of the paused time runs. A job the
store does not know yet is scheduled first (the catalog is synced, as a starting host would),
so it can be paused before any host has run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.rules.desired import desired_schedules
from jobhost.store import Clock, ScheduleRecord, SystemClock, database_now
from jobhost.store.operations import get_schedule, pause_job, resume_job
from jobhost.store.registry import sync_schedules

__all__ = ["PauseResult", "pause", "resume"]


@dataclass(frozen=True)
class PauseResult:
    """What the command changed: ``changed`` is False when the job already was so."""

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
    by: str,
    reason: str,
    clock: Clock | None = None,
) -> PauseResult:
    """Pause ``job`` (a name the catalog or the store knows) for every replica."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        if get_schedule(connection, job) is None and job in catalog.jobs:
            sync_schedules(connection, desired_schedules(catalog.jobs), now)
        changed = pause_job(connection, job, by, reason, now)
        row = get_schedule(connection, job)
    assert row is not None, f"job {job} has a schedule row once synced"
    return PauseResult(job, changed, now, row)


def resume(engine: Engine, job: str, *, clock: Clock | None = None) -> PauseResult | None:
    """Resume ``job``; None when the store has never scheduled it (so it was not paused)."""
    with engine.begin() as connection:
        now = database_now(connection, clock or SystemClock())
        before = get_schedule(connection, job)
        if before is None:
            return None
        changed = resume_job(connection, job)
    return PauseResult(job, changed, now, before)
