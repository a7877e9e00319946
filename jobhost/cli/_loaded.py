"""What ``jobhost validate`` loaded: each plugin, its modules, and each job's state.

A module that nobody configured declares its jobs disabled; saying so here, with the reason,
is how an operator learns that a module's jobs are off without reading the report.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings

__all__ = ["disabled_because", "loaded", "loaded_lines"]


def loaded(catalog: Catalog, settings: Settings) -> list[dict[str, object]]:
    """One entry per plugin, in load order (then any other plugin a job came from)."""
    by_plugin: dict[str, list[JobSpec]] = {name: [] for name in catalog.plugins}
    for spec in catalog.jobs.values():
        if spec.name not in catalog.runtime:
            by_plugin.setdefault(spec.plugin, []).append(spec)
    return [
        {
            "plugin": plugin,
            "modules": sorted({spec.module for spec in specs}),
            "jobs": [_job(spec, settings) for spec in specs],
        }
        for plugin, specs in by_plugin.items()
    ]


def loaded_lines(plugins: list[dict[str, object]]) -> Iterator[str]:
    """``plugin files: module files`` then one indented line per job."""
    for entry in plugins:
        modules = entry["modules"]
        assert isinstance(modules, list)
        jobs = entry["jobs"]
        assert isinstance(jobs, list)
        if not jobs:
            yield f"plugin {entry['plugin']}: no jobs"
            continue
        noun = "module" if len(modules) == 1 else "modules"
        yield f"plugin {entry['plugin']}: {noun} {', '.join(modules)}"
        for job in jobs:
            state = "enabled"
            if not job["enabled"]:
                state = f"disabled ({job['disabled_because']})"
            group = f", group {job['group']}" if job["group"] else ""
            yield f"  {job['name']}: {state}, {job['trigger']}{group}"


def disabled_because(spec: JobSpec, settings: Settings) -> str | None:
    """Why ``spec`` does not run on its schedule, or None when it does."""
    if spec.enabled:
        return None
    if spec.override is not None and spec.override.enabled is False:
        return f'[jobs."{spec.name}"] enabled = false'
    section = spec.declaration.configuration_source or spec.module
    if section not in settings.modules:
        return f"[modules.{section}] is not configured"
    return "declared disabled"


def _job(spec: JobSpec, settings: Settings) -> dict[str, object]:
    return {
        "name": spec.name,
        "module": spec.module,
        "enabled": spec.enabled,
        "disabled_because": disabled_because(spec, settings),
        "trigger": spec.trigger.describe(),
        "group": spec.concurrency_group,
    }
