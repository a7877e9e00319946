"""The validated job catalog: what each job is, when it fires, and what is wrong with the rest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from types import MappingProxyType
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

__all__ = [
    "EMPTY_CONFIG",
    "NAME_PATTERN",
    "NAME_RULE",
    "POLICY_DEFAULTS",
    "Catalog",
    "EffectiveTrigger",
    "JobSpec",
    "Problem",
]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
NAME_RULE = (
    "lower case, the module then the job separated by a dot ('files.orphan-cleanup'), "
    "made of a-z, 0-9, '-' and '_', each part starting with a letter or digit"
)
_LONGEST_SUGGESTED = 500
POLICY_DEFAULTS = policy_values(JobPolicies())
EMPTY_CONFIG: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the catalog; ``message`` says what and how to fix it. ``module`` is
    the plugin's name for a problem found before there is a declaration to ask."""

    job: str | None
    module: str | None
    code: str
    message: str

    def line(self) -> str:
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
    """When a job fires: a cron expression or an interval (``expression`` as an operator writes
    it, ``6h``) in a time zone; ``kind`` None for none (a disabled job). ``source`` is
    ``override`` when ``[jobs."name"]`` changed the trigger, its zone or its daylight-saving
    policy, and ``api`` for a runtime job.
    """

    kind: Literal["cron", "interval"] | None
    expression: str | None
    interval: timedelta | None
    timezone: str
    source: Literal["declaration", "override", "api"]
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.ONCE

    def describe(self) -> str:
        """``cron '30 2 * * *' (Europe/Berlin; dst_gap=skip)``, ``every 6h`` or ``no trigger``."""
        if self.kind == "cron":
            policy = self.dst_policy()
            zone = f"{self.timezone}; {policy}" if policy else self.timezone
            return f"cron {self.expression!r} ({zone})"
        if self.kind == "interval":
            return f"every {self.expression}"
        return "no trigger"

    def dst_policy(self) -> str | None:
        """The parts that differ from the default (``dst_gap=skip, dst_repeat=both``), or None."""
        chosen = chosen_dst_policy(self.dst_gap, self.dst_repeat)
        return ", ".join(f"{name}={value}" for name, value in chosen.items()) or None


def chosen_dst_policy(dst_gap: DstGap, dst_repeat: DstRepeat) -> dict[str, str]:
    chosen = {"dst_gap": dst_gap, "dst_repeat": dst_repeat}
    return {
        name: policy.value for name, policy in chosen.items() if policy is not POLICY_DEFAULTS[name]
    }


@dataclass(frozen=True)
class JobSpec:
    """One runnable job: ``trigger``, ``enabled`` and ``concurrency_group`` are effective
    (overrides applied), ``declared`` is the declaration's own trigger, ``config`` the module's
    read-only ``[modules.NAME]`` section."""

    declaration: BackgroundJobDeclaration
    executor: IJobExecutor
    plugin: str
    trigger: EffectiveTrigger
    declared: EffectiveTrigger
    enabled: bool
    override: JobOverride | None
    config: Mapping[str, Any]
    concurrency_group: str | None = None

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
    """Every runnable job, sorted by name (``runtime`` names the runtime ones), every problem
    found (an unrunnable job is only there), and ``warnings`` that do not stop the host."""

    jobs: dict[str, JobSpec]
    problems: list[Problem]
    plugins: tuple[str, ...] = field(default=())
    audit_sinks: tuple[AuditSink, ...] = field(default=())
    kinds: Mapping[str, JobKind] = field(default_factory=dict)
    runtime: frozenset[str] = field(default=frozenset())
    warnings: list[Problem] = field(default_factory=list)

    def replace_jobs(self, jobs: dict[str, JobSpec], runtime: frozenset[str]) -> None:
        """Swap in a new job mapping (runtime jobs changed), the one change a built catalog
        sees: in one assignment, so a reader iterating the old one finishes with it."""
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "runtime", runtime)

    @property
    def ok(self) -> bool:
        return not self.problems

    def get(self, name: str) -> JobSpec:
        """The job called ``name``; :class:`UnknownJobError` with the closest names otherwise."""
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJobError(name, suggest(name, self.jobs)) from None

    def problems_for(self, name: str) -> list[Problem]:
        return [problem for problem in self.problems if problem.job == name]


def suggest(name: str, candidates: Mapping[str, object] | list[str]) -> list[str]:
    """Up to three names close to ``name``, the closest first; none for a name so long that
    comparing it would cost seconds."""
    import difflib  # only an unknown name needs it

    if len(name) > _LONGEST_SUGGESTED:
        return []
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
