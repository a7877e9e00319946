"""The catalog as the store holds it: what read-only commands work from, loading no plugin.

Every sync writes each job's effective declaration into its schedule row (see
:mod:`jobhost.catalog.stored`); :func:`catalog_of` reads those rows back into a
:class:`Catalog` whose jobs equal the synced ones in everything but their executors. So
``report``, ``history``, ``next``, ``health``, ``pause``, ``resume``, ``trigger --no-wait`` and
``jobs list|show`` answer where the application's module packages are not installed. A row
synced before the store held declarations (schema 0010 and older, until the next ``jobhost
run``) is shown from its trigger columns with the declaration's defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from jobhost_contracts import (
    BackgroundJobDeclaration,
    format_duration,
    parse_duration,
    policy_values,
)

from jobhost.catalog import Catalog, EffectiveTrigger, JobSpec
from jobhost.catalog.stored import StoredExecutor, json_value, stored_spec
from jobhost.config import Settings
from jobhost.records import ScheduleRecord
from jobhost.store import Store

__all__ = ["catalog_of", "declaration_json", "stored_catalog", "stored_job", "stored_version"]


def stored_catalog(settings: Settings, store: Store, *, only: str | None = None) -> Catalog:
    """The store's catalog; with ``only``, just that job (one indexed row)."""
    rows = store.list_schedules([only] if only is not None else None)
    return catalog_of(settings, rows.values())


def stored_version(counts: Mapping[str, int]) -> str | None:
    """The catalog version most live declared rows hold (``counts``, as
    :func:`~jobhost.store.census.catalog_versions` reads them): the one the newest sync wrote.
    A tie goes to the greater version text, so every reader names the same one."""
    return max(counts, key=lambda version: (counts[version], version)) if counts else None


def catalog_of(settings: Settings, rows: Iterable[ScheduleRecord]) -> Catalog:
    """The live (not orphaned) jobs of ``rows``, as a catalog with no problems."""
    jobs: dict[str, JobSpec] = {}
    runtime: set[str] = set()
    for row in sorted(rows, key=lambda r: r.job_name):
        if row.orphaned:
            continue
        spec = stored_job(settings, row)
        if spec is None:
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
    kind = row.trigger_kind if row.trigger_kind in ("cron", "interval") else None
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
        source=(
            "api"
            if row.trigger_source == "api"
            else "override"
            if row.trigger_source == "override"
            else "declaration"
        ),
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
