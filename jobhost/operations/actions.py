"""Operator actions: one path from every surface, one change log.

``jobhost pause|resume|trigger``, the dashboard's buttons and ``/api/v1/jobs/{name}/...`` all
call these functions. Each changes the store and writes its entry in the change log
(``job_changes``: when, who, what, which job, before and after, why) in one transaction, so an
action is never done without its entry nor logged without being done. ``actor`` is whoever the
surface vouches for: the operating-system user for the CLI, the operator token's name for the
dashboard, the API token's name for the API. The log is read by ``jobhost changes``,
``GET /api/v1/changes`` and the dashboard's job page.

A new action is one more function here over one more store operation in
``jobhost.store.actions``, which makes the change and records it in the transaction it opens
itself. Besides pause, resume and trigger: ``retry_run`` (``jobhost retry RUN_ID``) queues the
next attempt at one run's occurrence, ``cancel_run`` (``jobhost cancel RUN_ID``) asks the run's
host to cancel it, and ``pause_jobs`` / ``resume_jobs`` act on many jobs with one reason; each
job gets its own entry. ``start_backfill`` / ``cancel_backfill`` record a backfill. The actions
on one run live in :mod:`jobhost.operations.run_actions` and are exported here with the others:
an action that cannot be done raises :class:`ActionRefused`, whose message names the run and
the fix.

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

from jobhost.catalog import Catalog, JobSpec
from jobhost.clock import Clock, SystemClock
from jobhost.operations.run_actions import (
    RETRYABLE,
    ActionRefused,
    CancelAsked,
    RetryQueued,
    cancel_run,
    retry_run,
)
from jobhost.records import BackfillRecord, ScheduleRecord
from jobhost.rules.desired import desired_schedules
from jobhost.store import Store

__all__ = [
    "RETRYABLE",
    "ActionRefused",
    "CancelAsked",
    "PauseResult",
    "RetryQueued",
    "cancel_backfill",
    "cancel_run",
    "ensure_scheduled",
    "jobs_matching",
    "pause",
    "pause_jobs",
    "request_trigger",
    "resume",
    "resume_jobs",
    "retry_run",
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
    store: Store,
    catalog: Catalog,
    job: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> PauseResult:
    """Pause ``job`` (a name the catalog or the store knows) for every replica."""
    (done,) = pause_jobs(store, catalog, [job], actor=actor, reason=reason, clock=clock)
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
    store: Store,
    catalog: Catalog,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> list[PauseResult]:
    """Pause every job of ``jobs`` in one transaction, one change-log entry per job paused."""
    declared = {
        job: desired_schedules({job: catalog.jobs[job]}) for job in jobs if job in catalog.jobs
    }
    done = store.pause_many_logged(
        jobs, actor=actor, reason=reason, clock=clock or SystemClock(), schedules=declared
    )
    results = []
    for job, paused in zip(jobs, done, strict=True):
        assert paused.row is not None, f"job {job} has a schedule row once synced"
        results.append(PauseResult(job, paused.changed, paused.at, paused.row))
    return results


def resume(
    store: Store,
    job: str,
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> PauseResult | None:
    """Resume ``job``; None when the store has never scheduled it (so it was not paused)."""
    (done,) = resume_jobs(store, [job], actor=actor, reason=reason, clock=clock)
    return done


def resume_jobs(
    store: Store,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> list[PauseResult | None]:
    """Resume every job of ``jobs`` in one transaction (None for a job never scheduled)."""
    done = store.resume_many_logged(jobs, actor=actor, reason=reason, clock=clock or SystemClock())
    return [
        PauseResult(job, r.changed, r.at, r.row) if r.row is not None else None
        for job, r in zip(jobs, done, strict=True)
    ]


def request_trigger(
    store: Store,
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
    return store.request_logged(
        job,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        beside_limit=beside_limit,
    )


def ensure_scheduled(store: Store, spec: JobSpec, clock: Clock) -> None:
    """Give the job a schedule row if no host has yet, as a starting host would: a backfill's
    claim locks it."""
    store.ensure_scheduled(spec.name, desired_schedules({spec.name: spec}), clock)


def start_backfill(
    store: Store,
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
    return store.backfill_logged(
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
    store: Store,
    backfill_id: str,
    *,
    actor: str,
    reason: str | None = None,
    clock: Clock | None = None,
) -> BackfillRecord | None:
    """Stop a running backfill claiming new occurrences (its runs in flight finish); the
    backfill after it (None: no such backfill). Only a change is logged."""
    return store.cancel_backfill_logged(
        backfill_id, actor=actor, reason=reason, clock=clock or SystemClock()
    )
