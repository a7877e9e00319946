"""Jobs as operators act on them: pause, resume and trigger; the catalog the store holds (read
commands answer without the module packages); a job's durable state; which job a name means.

Each action changes the store and writes its change-log entry in one transaction; ``actor`` is
whoever the surface vouches for (the OS user, the operator or API token's name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
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
from jobhost.store.actions import ChangeState, Paused, Request, SetPaused
from jobhost.store.snapshot import JobRead

__all__ = [
    "KEY_LIMIT",
    "VALUE_LIMIT",
    "ActionRefused",
    "BadStateInput",
    "JobStateView",
    "catalog_of",
    "change_state",
    "declaration_json",
    "jobs_matching",
    "kinds_json",
    "pause_jobs",
    "read_state",
    "request_trigger",
    "require_known_job",
    "resume_jobs",
    "set_paused",
    "state_json",
    "stored_catalog",
    "stored_job",
    "stored_version",
]


class ActionRefused(Exception):
    """An operator action that cannot be done; the message names the fix. ``unknown``: the
    run or job does not exist (the API answers 404, not 409)."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


def jobs_matching(catalog: Catalog, modules: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The catalog's jobs of any of ``modules`` or whose name matches any of ``patterns``
    (shell-style: ``billing.*``), by name."""
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
) -> list[Paused]:
    """Pause every job of ``jobs`` (names the catalog or the store knows) for every replica, in
    one transaction, one change-log entry per job paused."""
    declared = {
        job: desired_schedules({job: catalog.jobs[job]}) for job in jobs if job in catalog.jobs
    }
    pause = SetPaused(jobs, paused=True, schedules=declared)
    done = store.act(pause, actor=actor, reason=reason, clock=store.clock)
    assert None not in done, "every job has a schedule row once synced"
    return [paused for paused in done if paused is not None]


def resume_jobs(
    store: Store,
    jobs: Sequence[str],
    *,
    actor: str,
    reason: str | None = None,
) -> list[Paused | None]:
    """Resume every job of ``jobs`` in one transaction (None for a job never scheduled)."""
    return store.act(SetPaused(jobs, paused=False), actor=actor, reason=reason, clock=store.clock)


def set_paused(
    store: Store,
    catalog: Catalog,
    jobs: Sequence[str],
    *,
    paused: bool,
    actor: str,
    reason: str,
) -> list[bool]:
    """Pause or resume ``jobs``: whether each changed (a job never scheduled is not resumed)."""
    if paused:
        return [d.changed for d in pause_jobs(store, catalog, jobs, actor=actor, reason=reason)]
    done = resume_jobs(store, jobs, actor=actor, reason=reason)
    return [d is not None and d.changed for d in done]


def request_trigger(store: Store, job: str, *, actor: str, reason: str | None) -> str:
    """Queue a manual run of ``job``; the request's id."""
    queued = store.act(Request(job), actor=actor, reason=reason, clock=store.clock)
    assert queued.id is not None, "a request with no policy is never refused"
    return queued.id


def require_known_job(catalog: Catalog | None, store: Store, name: str) -> str:
    """``name`` if the catalog or the store knows it (reading only the job's own rows);
    :class:`UnknownJobError` with the closest names both know otherwise."""
    declared = catalog.jobs if catalog is not None else {}
    if name in declared or store.stored_job_names([name]):
        return name
    raise UnknownJobError(name, suggest(name, sorted({*declared, *store.stored_job_names()})))


def stored_catalog(settings: Settings, store: Store, *, only: str | None = None) -> Catalog:
    """The store's catalog; with ``only``, just that job (one indexed row)."""
    rows = store.list_schedules([only] if only is not None else None)
    return catalog_of(settings, rows.values())


def stored_version(counts: Mapping[str, int]) -> str | None:
    """The catalog version most live declared rows hold: the one the newest sync wrote. A tie
    goes to the greater version text, so every reader names the same one."""
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
    """The job kinds by name (``jobhost kinds --json``, ``GET /api/v1/kinds``)."""
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
_SHOWN_KEYS = 1000
"""Keys a read lists; it says when the job has more."""


class BadStateInput(ValueError):
    """A key or value an operator may not write; the message says why."""


@dataclass(frozen=True)
class JobStateView:
    job: str
    entries: list[StateEntry]
    more: bool
    """The job has more keys than :data:`_SHOWN_KEYS`."""


def read_state(store: Store, job: str) -> JobStateView:
    """The job's keys and values, by key (at most :data:`_SHOWN_KEYS`)."""
    entries = store.job_page(JobRead(job, state=_SHOWN_KEYS + 1)).state
    return JobStateView(job, entries[:_SHOWN_KEYS], len(entries) > _SHOWN_KEYS)


def state_json(view: JobStateView) -> dict[str, Any]:
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
    """Set ``key`` of ``job``'s state to ``value`` (``None``: delete it). :class:`BadStateInput`
    for a key or value out of bounds; :class:`ActionRefused` while a run of the job is running
    or when the store holds no schedule of the job."""
    if not key.strip():
        raise BadStateInput("the key is empty")
    if len(key) > KEY_LIMIT:
        raise BadStateInput(f"the key is {len(key)} characters; keys are at most {KEY_LIMIT}")
    if value is not None and len(value) > VALUE_LIMIT:
        raise BadStateInput(f"the value is {len(value)} characters; keep it to {VALUE_LIMIT}")
    try:
        change = ChangeState(job, key, value)
        done = store.act(change, actor=actor, reason=reason, clock=store.clock)
    except StateHeld as held:
        run = held.run
        since = f" since {short_utc(run.started_at)}" if run.started_at is not None else ""
        raise ActionRefused(
            f"job {held.job_name} has a live run {run.id} (running on host {run.host_id}{since}): "
            "its state changes only between runs; wait for the run to end, or cancel it first "
            f"(jobhost cancel {run.id} --reason ...)"
        ) from None
    if not done.known:
        raise ActionRefused(
            f"the store holds no schedule of job {job}: a host writes it when it starts, "
            "and only then can its state be changed",
            unknown=True,
        )
    return done
