"""Jobs as operators act on them: pause, resume and trigger; the catalog the store holds; a
job's durable state; which job a name means.

``jobhost pause|resume|trigger``, the dashboard's buttons and ``/api/v1/jobs/{name}/...`` all
call these functions. Each is one store operation (``jobhost.store.actions``) that changes the
store and writes its change-log entry (``job_changes``) in the one transaction it opens, so an
action is never done without its entry nor logged without being done. ``actor`` is whoever the
surface vouches for: the operating-system user (CLI), the operator token's name (dashboard), the
API token's name (API). The actions on runs, failures and backfills live in :mod:`.runs`,
:mod:`.failures` and :mod:`.backfills`; one that cannot be done raises :class:`ActionRefused`,
whose message names the run and the fix.

A paused job keeps its schedule: hosts record each occurrence it misses as ``missed`` with
reason ``paused``; on resume its misfire policy decides what of the paused time runs. A job the
store does not know yet is scheduled first (the catalog is synced, as a starting host would),
so it can be paused before any host has run.

Every sync writes each job's effective declaration into its schedule row (see
:mod:`jobhost.catalog.stored`); :func:`catalog_of` reads those rows back into a
:class:`Catalog` whose jobs equal the synced ones in everything but their executors. So
``report``, ``history``, ``next``, ``health``, ``pause``, ``resume``, ``trigger --no-wait`` and
``jobs list|show`` answer where the application's module packages are not installed. A row
synced before the store held declarations (schema 0010 and older, until the next ``jobhost
run``) is shown from its trigger columns with the declaration's defaults.

A job's durable state (``jobhost state NAME``, ``GET`` and ``PUT``/``DELETE
/api/v1/jobs/{name}/state/{key}``, the job page) is read from the store alone. A change is
refused while a run of the job is running, and is recorded in the change log (actions
``state-set`` and ``state-delete``, ``before`` and ``after`` holding the key and its value) in
the transaction that makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobKind,
    format_duration,
    parse_duration,
    policy_values,
)

from jobhost.catalog import Catalog, EffectiveTrigger, JobSpec
from jobhost.catalog.model import suggest
from jobhost.catalog.stored import StoredExecutor, json_value, stored_spec
from jobhost.config import Settings
from jobhost.errors import UnknownJobError
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import ScheduleRecord, StateChange, StateEntry, StateHeld
from jobhost.rules import desired_schedules
from jobhost.store import Store

__all__ = [
    "KEY_LIMIT",
    "SHOWN_KEYS",
    "VALUE_LIMIT",
    "ActionRefused",
    "BadStateInput",
    "JobStateView",
    "PauseResult",
    "catalog_of",
    "change_state",
    "check_key",
    "declaration_json",
    "jobs_matching",
    "kinds_json",
    "pause",
    "pause_jobs",
    "read_state",
    "request_trigger",
    "require_known_job",
    "resume",
    "resume_jobs",
    "state_json",
    "stored_catalog",
    "stored_job",
    "stored_version",
]


class ActionRefused(Exception):
    """An operator action that cannot be done; the message names the run and the fix.
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
    store: Store,
    catalog: Catalog,
    job: str,
    *,
    actor: str,
    reason: str,
) -> PauseResult:
    """Pause ``job`` (a name the catalog or the store knows) for every replica."""
    return pause_jobs(store, catalog, [job], actor=actor, reason=reason)[0]


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
) -> list[PauseResult]:
    """Pause every job of ``jobs`` in one transaction, one change-log entry per job paused."""
    declared = {
        job: desired_schedules({job: catalog.jobs[job]}) for job in jobs if job in catalog.jobs
    }
    done = store.set_paused_logged(
        jobs, paused=True, actor=actor, reason=reason, clock=store.clock, schedules=declared
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
) -> PauseResult | None:
    """Resume ``job``; None when the store has never scheduled it (so it was not paused)."""
    return resume_jobs(store, [job], actor=actor, reason=reason)[0]


def resume_jobs(
    store: Store,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str | None = None,
) -> list[PauseResult | None]:
    """Resume every job of ``jobs`` in one transaction (None for a job never scheduled)."""
    done = store.set_paused_logged(
        jobs, paused=False, actor=actor, reason=reason, clock=store.clock
    )
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
    beside_limit: bool = False,
) -> str:
    """Queue a manual run of ``job`` for the first live host (or the command's own process);
    the request's id. ``beside_limit`` starts it even in a full concurrency group (``--now``),
    and the change record says so."""
    return store.request_logged(
        job,
        actor=actor,
        reason=reason,
        clock=store.clock,
        beside_limit=beside_limit,
    )


def require_known_job(catalog: Catalog | None, store: Store, name: str) -> str:
    """``name`` if the catalog or the store knows it (reading only the job's own rows);
    :class:`UnknownJobError` with the closest names both know otherwise."""
    declared = catalog.jobs if catalog is not None else {}
    if name in declared or store.job_is_known(name):
        return name
    raise UnknownJobError(name, suggest(name, sorted({*declared, *store.stored_job_names()})))


def stored_catalog(settings: Settings, store: Store, *, only: str | None = None) -> Catalog:
    """The store's catalog; with ``only``, just that job (one indexed row)."""
    rows = store.list_schedules([only] if only is not None else None)
    return catalog_of(settings, rows.values())


def stored_version(counts: Mapping[str, int]) -> str | None:
    """The catalog version most live declared rows hold (``counts``, as
    :func:`~jobhost.store.snapshot.catalog_versions` reads them): the one the newest sync wrote.
    A tie goes to the greater version text, so every reader names the same one."""
    return max(counts, key=lambda version: (counts[version], version)) if counts else None


def catalog_of(settings: Settings, rows: Iterable[ScheduleRecord]) -> Catalog:
    """The live (not orphaned) jobs of ``rows``, as a catalog with no problems."""
    jobs: dict[str, JobSpec] = {}
    runtime: set[str] = set()
    for row in sorted(rows, key=lambda r: r.job_name):
        if row.orphaned or (spec := stored_job(settings, row)) is None:
            continue
        jobs[row.job_name] = spec
        if row.trigger_source == "api":
            runtime.add(row.job_name)
    return Catalog(jobs=jobs, problems=[], runtime=frozenset(runtime))


def stored_job(settings: Settings, row: ScheduleRecord) -> JobSpec | None:
    """The job ``row`` declares, rebuilt whole; None when its columns describe no job."""
    if row.declaration is not None:
        try:
            return stored_spec(
                row.job_name, row.module, row.declaration, settings.modules.get(row.module, {})
            )
        except (ValueError, KeyError, TypeError):
            pass  # written by another version: shown from its columns, as before a sync
    return _from_columns(row)


def _from_columns(row: ScheduleRecord) -> JobSpec | None:
    interval: timedelta | None = None
    kind, source = row.trigger_kind, row.trigger_source
    if kind == "interval":
        try:
            interval = parse_duration(row.trigger_expression)
        except (TypeError, ValueError):
            return None
    trigger = EffectiveTrigger(
        kind="cron" if kind == "cron" else "interval" if kind == "interval" else None,
        expression=row.trigger_expression,
        interval=interval,
        timezone=row.timezone,
        source="api" if source == "api" else "override" if source == "override" else "declaration",
    )
    declaration = BackgroundJobDeclaration(
        name=row.job_name,
        module=row.module,
        cron=row.trigger_expression if kind == "cron" else None,
        interval=interval,
        timezone=row.timezone,
        enabled=row.enabled,
    )
    return JobSpec(
        declaration=declaration,
        executor=StoredExecutor(row.job_name),
        plugin=row.module,
        trigger=trigger,
        declared=trigger,
        enabled=row.enabled,
        override=None,
        config={},
        concurrency_group=row.concurrency_group,
    )


def declaration_json(spec: JobSpec, *, runtime: bool = False) -> dict[str, Any]:
    """A job's effective declaration as ``jobhost jobs show --json`` prints it."""
    declaration, trigger = spec.declaration, spec.trigger
    return {
        "name": spec.name,
        "module": spec.module,
        "source": "api" if runtime else trigger.source,
        "job_source": "runtime" if runtime else "module",
        "description": declaration.description,
        "critical": declaration.critical,
        "enabled": spec.enabled,
        "trigger": trigger.describe(),
        "declared_trigger": spec.declared.describe(),
        "timezone": trigger.timezone,
        "dst_policy": f"dst_gap={trigger.dst_gap.value}, dst_repeat={trigger.dst_repeat.value}",
        "concurrency_group": spec.concurrency_group,
        "policies": {
            key: json_value(value, format_duration)
            for key, value in policy_values(declaration).items()
            if key not in _SHOWN_APART
        },
    }


# Policies the answer shows on their own, as they are in effect: the trigger and its zone and
# daylight-saving policy, the enabled and critical flags, the group.
_SHOWN_APART = frozenset(
    {
        *("cron", "interval", "timezone", "dst_gap", "dst_repeat"),
        *("enabled", "critical", "concurrency_group"),
    }
)


def kinds_json(kinds: Mapping[str, JobKind]) -> dict[str, Any]:
    """The job kinds by name, as ``jobhost kinds --json`` prints and ``GET /api/v1/kinds``
    answers them."""
    return {
        "kinds": [
            {
                "name": kind.name,
                "description": kind.description,
                "module": kind.module,
                "settings_schema": dict(kind.settings_schema),
                "examples": [dict(example) for example in kind.examples],
            }
            for kind in (kinds[name] for name in sorted(kinds))
        ]
    }


KEY_LIMIT = 200
"""Characters of a key: what the ``job_state`` table holds."""
VALUE_LIMIT = 65_536
"""Characters of a value an operator may write."""
SHOWN_KEYS = 1000
"""Keys a read lists; it says when the job has more."""


class BadStateInput(ValueError):
    """A key or value an operator may not write; the message says why."""


@dataclass(frozen=True)
class JobStateView:
    job: str
    entries: list[StateEntry]
    more: bool
    """The job has more keys than :data:`SHOWN_KEYS`."""


def read_state(store: Store, job: str) -> JobStateView:
    """The job's keys and values, by key (at most :data:`SHOWN_KEYS`)."""
    entries = list(store.list_state(job, limit=SHOWN_KEYS + 1))
    return JobStateView(job, entries[:SHOWN_KEYS], len(entries) > SHOWN_KEYS)


def state_json(view: JobStateView) -> dict[str, Any]:
    """``{"job", "state": [{"key", "value", "updated_at", "fencing_token"}], "more"}``."""
    return {
        "job": view.job,
        "state": [
            {
                "key": e.key,
                "value": e.value,
                "updated_at": iso_utc(e.updated_at),
                "fencing_token": e.fencing_token,
            }
            for e in view.entries
        ],
        "more": view.more,
    }


def change_state(
    store: Store,
    job: str,
    key: str,
    value: str | None,
    *,
    actor: str,
    reason: str,
) -> StateChange:
    """Set ``key`` of ``job``'s state to ``value`` (``None``: delete it), logged with
    ``reason``. Raises :class:`BadStateInput` for a key or value out of bounds and
    :class:`ActionRefused` while a run of the job is running (naming the run) or when the store
    holds no schedule of the job (``unknown``)."""
    check_key(key)
    if value is not None and len(value) > VALUE_LIMIT:
        raise BadStateInput(f"the value is {len(value)} characters; keep it to {VALUE_LIMIT}")
    try:
        done = store.change_state_logged(
            job, key, value, actor=actor, reason=reason, clock=store.clock
        )
    except StateHeld as held:
        raise ActionRefused(_held_message(held)) from None
    if not done.known:
        raise ActionRefused(
            f"the store holds no schedule of job {job}: a host writes it when it starts, "
            "and only then can its state be changed",
            unknown=True,
        )
    return done


def check_key(key: str) -> None:
    """Refuse a key no job could have written: empty, or longer than the table holds."""
    if not key.strip():
        raise BadStateInput("the key is empty")
    if len(key) > KEY_LIMIT:
        raise BadStateInput(f"the key is {len(key)} characters; keys are at most {KEY_LIMIT}")


def _held_message(held: StateHeld) -> str:
    run = held.run
    since = f" since {short_utc(run.started_at)}" if run.started_at is not None else ""
    return (
        f"job {held.job_name} has a live run {run.id} (running on host {run.host_id}{since}): "
        "its state changes only between runs; wait for the run to end, or cancel it first "
        f"(jobhost cancel {run.id} --reason ...)"
    )
