"""Building the catalog: load the plugins, collect their jobs, validate them, apply overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from jobhost_contracts import BackgroundJobDeclaration, IJobExecutor, as_executor
from jobhost_contracts.context import frozen

from jobhost.catalog.model import EMPTY_CONFIG, Catalog, EffectiveTrigger, JobSpec, Problem
from jobhost.catalog.validation import (
    POLICY_CODES,
    TriggerChecks,
    check_critical,
    check_group,
    check_name,
    check_policies,
    check_prefix,
    declared_parts,
    effective_group,
    effective_parts,
    pair_problems,
    unknown_overrides,
    unused_limits,
)
from jobhost.config import Settings
from jobhost.plugins import (
    PluginJob,
    PluginProblem,
    collect_audit_sinks,
    collect_jobs,
    collect_kinds,
    load_plugins,
)

__all__ = ["build_catalog"]

# A job with one of these in its effective trigger has no schedule the host could follow.
_UNSCHEDULABLE = frozenset(
    {
        "both-triggers",
        "override-both-triggers",
        "cron-syntax",
        "cron-never-fires",
        "unknown-timezone",
        "non-positive-interval",
        "interval-too-long",
    }
)

_DECLARED_NOTHING = frozenset({"plugin-import", "plugin-hook", "module-settings"})
# Problems of a disabled job that are warnings: it does not run on its own.
_DISABLED_WARNS = frozenset({"unknown-concurrency-group"})
_DISABLED_NOTE = " (the job is disabled: the host starts, and a run by hand is not limited)"


def build_catalog(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Catalog:
    """The job catalog for ``settings``; every problem is listed, sorted by job then code,
    never raised. ``environ`` is read for ``JOBHOST_LOAD_PLUGINS`` only."""
    environ = os.environ if environ is None else environ
    plugins = load_plugins(settings, environ=environ)
    collected, call_problems = collect_jobs(plugins, settings.modules)
    sinks, sink_problems = collect_audit_sinks(plugins, settings.modules)
    kinds, kind_problems = collect_kinds(plugins, settings.modules)
    plugin_problems = [*plugins.problems, *call_problems, *sink_problems, *kind_problems]
    problems = [_plugin_problem(p, settings, environ) for p in plugin_problems]

    modules = frozen(settings.modules)
    first: dict[str, PluginJob] = {}
    jobs: dict[str, JobSpec] = {}
    warnings: list[Problem] = []
    groups: set[str | None] = set()
    checks = TriggerChecks()
    for job in collected:
        unusable = pair_problems(job)
        problems.extend(unusable)
        declaration = job.declaration
        if not isinstance(declaration, BackgroundJobDeclaration):
            continue
        groups.add(effective_group(declaration, settings.jobs.get(declaration.name)))
        earlier = first.setdefault(declaration.name, job)
        duplicate = earlier is not job
        if duplicate:
            problems.append(_duplicate(earlier, job))
        spec, job_problems = _validate(
            job, declaration, settings, modules, checks, usable=not unusable
        )
        warnings.extend(check_prefix(declaration))
        # A disabled job's group needs no limit: installing a module never breaks a host.
        if spec is not None and not spec.enabled:
            warnings.extend(
                replace(p, message=p.message + _DISABLED_NOTE)
                for p in job_problems
                if p.code in _DISABLED_WARNS
            )
            job_problems = [p for p in job_problems if p.code not in _DISABLED_WARNS]
        problems.extend(job_problems)
        if spec is not None and not duplicate:
            jobs[spec.name] = spec

    failed = sum(p.code == "plugin-import" for p in plugins.problems)
    # A plugin that declared nothing may well join a limit's group: unused would mislead.
    declared_all = not any(p.code in _DECLARED_NOTHING for p in plugin_problems)
    unused = unused_limits(settings.concurrency_limits, groups) if declared_all else []
    problems.extend(unknown_overrides(settings.jobs, first.keys(), plugins_failed=failed))
    return Catalog(
        jobs={name: jobs[name] for name in sorted(jobs)},
        problems=_ordered(problems),
        plugins=tuple(plugins.names),
        audit_sinks=tuple(sinks),
        kinds=kinds,
        warnings=[*_ordered(warnings), *unused],
    )


def _validate(
    job: PluginJob,
    declaration: BackgroundJobDeclaration,
    settings: Settings,
    modules: Mapping[str, Mapping[str, Any]],
    checks: TriggerChecks,
    *,
    usable: bool,
) -> tuple[JobSpec | None, list[Problem]]:
    override = settings.jobs.get(declaration.name)
    declared = declared_parts(declaration)
    effective = effective_parts(declared, override)
    # The declaration is checked on its own too: it has to hold in every deployment.
    declared_problems = checks.problems(declared)
    effective_problems = (
        declared_problems
        if effective is declared or effective == declared
        else checks.problems(effective)
    )
    problems = [*check_name(declaration), *declared_problems]
    problems.extend(p for p in effective_problems if p not in problems)
    problems.extend(check_critical(declaration, effective))
    policy_problems = [
        *check_policies(declaration, settings),
        *check_group(declaration, override, settings),
    ]
    problems.extend(policy_problems)

    trigger = checks.trigger(effective)
    blocking = POLICY_CODES if effective.enabled else POLICY_CODES - _DISABLED_WARNS
    if (
        not usable
        or trigger is None
        or any(p.code in _UNSCHEDULABLE for p in effective_problems)
        or any(p.code in blocking for p in policy_problems)
    ):
        return None, problems
    return JobSpec(
        declaration=declaration,
        # pair_problems passed the executor, a stricter test than isinstance on the runtime
        # Protocol, which would cost 0.1 ms a job (a second of a 10,000-job start-up).
        executor=as_executor(cast(IJobExecutor, job.executor)),
        plugin=job.plugin,
        trigger=trigger,
        # None only for a declaration with both triggers, which an override replaced here.
        declared=(trigger if effective is declared else checks.trigger(declared))
        or EffectiveTrigger(None, None, None, declaration.timezone, "declaration"),
        enabled=effective.enabled,
        override=override,
        config=modules.get(declaration.configuration_source or declaration.module, EMPTY_CONFIG),
        concurrency_group=effective_group(declaration, override),
    ), problems


def _duplicate(earlier: PluginJob, later: PluginJob) -> Problem:
    assert isinstance(later.declaration, BackgroundJobDeclaration)
    name = later.declaration.name
    message = (
        f"job {name!r} is declared twice, by {_origin(earlier)} and by {_origin(later)}; rename "
        "one of them, job names are unique across all modules (the first one is kept)"
    )
    return Problem(name, later.declaration.module, "duplicate-name", message)


def _origin(job: PluginJob) -> str:
    assert isinstance(job.declaration, BackgroundJobDeclaration)
    return f"module {job.declaration.module} (plugin {job.plugin})"


def _plugin_problem(
    problem: PluginProblem, settings: Settings, environ: Mapping[str, str]
) -> Problem:
    if problem.code == "module-settings" and problem.section is not None:
        section = problem.section
        message = (
            f"[modules.{section}] ({settings.module_source(environ)}) "
            f"{problem.message}; fix [modules.{section}] (module {section} declares its jobs "
            "once its settings are valid)"
        )
        return Problem(None, section, problem.code, message)
    return Problem(None, problem.plugin, problem.code, problem.message)


def _ordered(problems: list[Problem]) -> list[Problem]:
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: (p.job is not None, p.job or "", p.code))
