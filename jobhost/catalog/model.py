"""The validated job catalog: what each job is, when it fires, and what is wrong with the rest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Literal

from jobhost_contracts import (
    AuditSink,
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    IJobExecutor,
    JobKind,
    JobPolicies,
    policy_values,
)

from jobhost.config import JobOverride
from jobhost.errors import UnknownJobError
from jobhost.triggers import CronSchedule, IntervalSchedule, Schedule, cron_schedule

__all__ = ["NAME_PATTERN", "NAME_RULE", "Catalog", "EffectiveTrigger", "JobSpec", "Problem"]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
NAME_RULE = (
    "lower case, the module then the job separated by a dot ('files.orphan-cleanup'), "
    "made of a-z, 0-9, '-' and '_', each part starting with a letter or digit"
)
_LONGEST_SUGGESTED = 500
"""Past this many characters an unknown name gets no suggestions."""
_DEFAULT = policy_values(JobPolicies())


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the catalog; ``message`` says what and how to fix it.

    ``module`` is the declaring module; for a problem found before there is a declaration to ask
    (a plugin that does not import, a pair without a declaration) it is the plugin's name.
    """

    job: str | None
    module: str | None
    code: str
    message: str

    def line(self) -> str:
        """One line for an operator: ``job (module m) [code]: message``."""
        if self.job is not None:
            where = self.job if self.module is None else f"{self.job} (module {self.module})"
        elif self.code == "module-settings":
            where = "configuration"
        elif self.module is not None:
            where = f"plugin {self.module}"
        else:
            where = "catalog"
        return f"{where} [{self.code}]: {self.message}"


@dataclass(frozen=True)
class EffectiveTrigger:
    """When a job fires: a cron expression or an interval, in a time zone.

    ``kind`` is None for a job without a trigger (allowed only while it is disabled).
    ``expression`` is the cron text, or the interval as an operator writes it (``6h``).
    ``source`` is ``override`` when a ``[jobs."name"]`` section changed the trigger, its zone or
    its daylight-saving policy (``dst_gap``, ``dst_repeat``: they matter to fixed-time cron jobs),
    and ``api`` for a runtime job (created through ``/api/v1`` or ``jobhost jobs put``).
    """

    kind: Literal["cron", "interval"] | None
    expression: str | None
    interval: timedelta | None
    timezone: str
    source: Literal["declaration", "override", "api"]
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.ONCE

    def describe(self) -> str:
        """``cron '0 3 * * *' (Europe/Berlin)``, ``every 6h`` or ``no trigger``; a policy other
        than the default is added: ``cron '30 2 * * *' (Europe/Berlin; dst_gap=skip)``."""
        if self.kind == "cron":
            policy = self.dst_policy()
            zone = f"{self.timezone}; {policy}" if policy else self.timezone
            return f"cron {self.expression!r} ({zone})"
        if self.kind == "interval":
            return f"every {self.expression}"
        return "no trigger"

    def dst_policy(self) -> str | None:
        """``dst_gap=skip, dst_repeat=both``: the parts that differ from the default, or None."""
        chosen = chosen_dst_policy(self.dst_gap, self.dst_repeat)
        return ", ".join(f"{name}={value}" for name, value in chosen.items()) or None


def chosen_dst_policy(dst_gap: DstGap, dst_repeat: DstRepeat) -> dict[str, str]:
    """The daylight-saving policies that differ from a declaration's default, by name."""
    chosen = {"dst_gap": dst_gap, "dst_repeat": dst_repeat}
    return {name: policy.value for name, policy in chosen.items() if policy is not _DEFAULT[name]}


@dataclass(frozen=True)
class JobSpec:
    """One runnable job: its declaration and executor as the plugin gave them, after overrides.

    ``trigger`` and ``enabled`` are effective (overrides applied); ``declared`` is what the
    declaration alone says. ``config`` is the module's read-only ``[modules.NAME]`` section.
    """

    declaration: BackgroundJobDeclaration
    executor: IJobExecutor
    plugin: str
    trigger: EffectiveTrigger
    declared: EffectiveTrigger
    enabled: bool
    override: JobOverride | None
    config: Mapping[str, Any]
    concurrency_group: str | None = None
    """The effective concurrency group (an override's, else the declaration's), or None."""

    @property
    def name(self) -> str:
        return self.declaration.name

    @property
    def module(self) -> str:
        return self.declaration.module

    def schedule(self, anchor: datetime) -> Schedule | None:
        """The effective trigger as a schedule; ``anchor`` is where an interval starts counting.

        None for a job without a trigger. The catalog built this trigger once already, so for a
        job in :attr:`Catalog.jobs` this does not raise.
        """
        if self.cron is not None:
            return self.cron
        trigger = self.trigger
        if trigger.kind == "interval" and trigger.interval is not None:
            return IntervalSchedule(trigger.interval, anchor)
        return None

    @cached_property
    def cron(self) -> CronSchedule | None:
        """The cron trigger as a schedule, parsed once (the loop asks on every turn); None for
        an interval job or one without a trigger."""
        trigger = self.trigger
        if trigger.kind == "cron" and trigger.expression is not None:
            return cron_schedule(
                trigger.expression,
                trigger.timezone,
                dst_gap=trigger.dst_gap,
                dst_repeat=trigger.dst_repeat,
            )
        return None


@dataclass(frozen=True)
class Catalog:
    """Every job the plugins declared that can be represented, and every problem found.

    A job with a problem that leaves it unrunnable (no executor, a duplicate name, a trigger
    that does not parse) is only in ``problems``; the rest are in ``jobs`` too, sorted by name.
    ``plugins`` names the plugins that loaded, in load order.
    """

    jobs: dict[str, JobSpec]
    problems: list[Problem]
    plugins: tuple[str, ...] = field(default=())
    audit_sinks: tuple[AuditSink, ...] = field(default=())
    """Sinks the plugins added through ``jobhost_audit_sinks``, after the built-in ones."""
    kinds: Mapping[str, JobKind] = field(default_factory=dict)
    """Job kinds the plugins offer through ``jobhost_job_kinds``, by name."""
    runtime: frozenset[str] = field(default=frozenset())
    """Names of the jobs in ``jobs`` that are runtime jobs (source ``api``)."""
    warnings: list[Problem] = field(default_factory=list)
    """Things worth fixing that do not stop the host (a concurrency limit no job uses)."""

    def replace_jobs(self, jobs: dict[str, JobSpec], runtime: frozenset[str]) -> None:
        """Swap in a new job mapping: the one place a built catalog changes (runtime jobs were
        created, changed or removed). The whole mapping is replaced in one assignment, so a
        reader iterating the old one (a report on another thread) finishes with it."""
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "runtime", runtime)

    @property
    def ok(self) -> bool:
        """Nothing to fix; the host refuses to run otherwise."""
        return not self.problems

    def get(self, name: str) -> JobSpec:
        """The job called ``name``; :class:`UnknownJobError` with the closest names otherwise."""
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJobError(name, suggest(name, self.jobs)) from None

    def problems_for(self, name: str) -> list[Problem]:
        """The problems naming job ``name``, in catalog order."""
        return [problem for problem in self.problems if problem.job == name]


def suggest(name: str, candidates: Mapping[str, object] | list[str]) -> list[str]:
    """Up to three names close to ``name``, the closest first; none for a name far longer than
    any job's (comparing it with every name would cost seconds, and nothing is close to it)."""
    import difflib  # only an unknown name needs it

    if len(name) > _LONGEST_SUGGESTED:
        return []
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
