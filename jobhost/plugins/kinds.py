"""Collecting the job kinds the plugins offer through ``jobhost_job_kinds``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobhost_contracts import JobKind

from jobhost.plugins.calls import _materialise, call_each, read_only
from jobhost.plugins.discovery import PluginProblem, PluginSet

__all__ = ["KindSet", "collect_kinds"]


@dataclass(frozen=True)
class KindSet:
    """Every usable kind by name, which plugin offered it, and what was wrong with the rest."""

    kinds: dict[str, JobKind] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)


def collect_kinds(plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]) -> KindSet:
    """Ask every plugin for its kinds; a duplicate name or a non-kind is a problem."""
    answers, problems = call_each(plugins, "jobhost_job_kinds", {"settings": read_only(modules)})
    found = KindSet(problems=problems)
    for answer in answers:
        items = _materialise(
            answer,
            problems,
            "jobhost_job_kinds",
            "a list of JobKind; return [] when the module offers none",
        )
        for position, item in enumerate(items or []):
            if not isinstance(item, JobKind):
                problems.append(
                    PluginProblem(
                        answer.plugin,
                        "plugin-bad-result",
                        f"jobhost_job_kinds item {position} is {type(item).__name__}, not a "
                        "JobKind; return jobhost_contracts.JobKind objects",
                    )
                )
            elif item.name in found.kinds:
                problems.append(
                    PluginProblem(
                        answer.plugin,
                        "plugin-bad-result",
                        f"job kind {item.name!r} is offered by plugin "
                        f"{found.plugins[item.name]} already; rename one of them",
                    )
                )
            else:
                found.kinds[item.name] = item
                found.plugins[item.name] = answer.plugin
    return found
