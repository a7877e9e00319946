"""Checking concurrency groups: every group a job joins has a limit, every limit has a job.

A job joins a group by its declaration's ``concurrency_group`` or by ``concurrency_group``
under ``[jobs."NAME"]`` (the override wins). A group without a ``[concurrency_limits]`` entry
would run without its limit, so it is a problem that keeps the host from starting; a limit no
job uses is only a warning (a job may be disabled or removed for a while).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jobhost_contracts import BackgroundJobDeclaration

from jobhost.catalog.model import Problem, suggest
from jobhost.config import GROUP_NAME, JobOverride, Settings

__all__ = ["GROUP_CODES", "check_group", "effective_group", "unused_limits"]

GROUP_CODES = frozenset({"unknown-concurrency-group", "bad-concurrency-group"})
"""Problems that keep a job out of the schedule: its group's limit could not be honoured."""


def effective_group(
    declaration: BackgroundJobDeclaration, override: JobOverride | None
) -> str | None:
    """The group the job runs in: the override's, else the declaration's, else None."""
    if override is not None and override.concurrency_group is not None:
        return override.concurrency_group or None
    return declaration.concurrency_group


def check_group(
    declaration: BackgroundJobDeclaration, override: JobOverride | None, settings: Settings
) -> list[Problem]:
    """The problem with the job's group, if any, with the fix."""
    group = effective_group(declaration, override)
    if group is None:
        return []
    from_override = override is not None and override.concurrency_group is not None
    where = (
        f'[jobs."{declaration.name}"] in the configuration'
        if from_override
        else f"the declaration in module {declaration.module}"
    )
    if not GROUP_NAME.fullmatch(group):
        return [
            Problem(
                declaration.name,
                declaration.module,
                "bad-concurrency-group",
                f"concurrency_group = {group!r} is not a group name (1 to 100 lower-case "
                f"letters, digits, '.', '_' or '-'); fix it in {where}",
            )
        ]
    limits = settings.concurrency_limits
    if group in limits:
        return []
    close = suggest(group, list(limits))
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return [
        Problem(
            declaration.name,
            declaration.module,
            "unknown-concurrency-group",
            f"concurrency_group = {group!r} names a group with no limit{hint}; add "
            f"'{group} = N' under [concurrency_limits] in the configuration, or fix the "
            f"group name in {where}",
        )
    ]


def unused_limits(limits: Mapping[str, int], used: Iterable[str | None]) -> list[Problem]:
    """A warning for every ``[concurrency_limits]`` entry no job joins."""
    joined = {group for group in used if group is not None}
    return [
        Problem(
            None,
            None,
            "unused-concurrency-limit",
            f"[concurrency_limits] {name} = {limits[name]} names a group no job joins; set "
            'concurrency_group on a job (declaration or [jobs."NAME"]) or remove the entry',
        )
        for name in sorted(limits)
        if name not in joined
    ]
