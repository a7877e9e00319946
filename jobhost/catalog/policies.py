"""Checking a declaration's policies: values that would break a guarantee are catalog problems.

The declaration's constructor checks only types; the values are judged here, with the host's
settings in hand, so that every job's problems are listed together. A concurrency group without
a ``[concurrency_limits]`` entry would run unlimited, so it keeps the host from starting; a limit
no job uses is only a warning (a job may be disabled or removed for a while).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from jobhost_contracts import BackgroundJobDeclaration, RetryPolicy, format_duration

from jobhost.catalog.model import Problem, suggest
from jobhost.catalog.overrides import section
from jobhost.config import GROUP_NAME, LEASE_HEARTBEATS, MAX_DURATION, JobOverride, Settings

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_CATCH_UP",
    "MAX_CONCURRENT",
    "POLICY_CODES",
    "check_group",
    "check_policies",
    "effective_group",
    "policy_problems",
    "unused_limits",
]

POLICY_CODES = frozenset(
    {
        *("bad-timeout", "bad-lease", "bad-retry", "bad-misfire", "bad-overlap"),
        *("unknown-concurrency-group", "bad-concurrency-group"),
    }
)
"""Problems that keep a job out of the schedule: the host cannot honour its policies."""

RETRYABLE_OUTCOMES = frozenset({"failed", "timed_out", "abandoned", "cancelled"})

MAX_ATTEMPTS = 100
MAX_CONCURRENT = 1024
MAX_CATCH_UP = 10_000


def check_policies(declaration: BackgroundJobDeclaration, settings: Settings) -> list[Problem]:
    found = policy_problems(declaration)
    lease = declaration.lease
    least = settings.heartbeat_interval * LEASE_HEARTBEATS
    if lease is not None and not least <= lease <= MAX_DURATION:
        rule = (
            f"must be at least {LEASE_HEARTBEATS}x heartbeat_interval "
            f"({format_duration(settings.heartbeat_interval)}), i.e. at least "
            f"{format_duration(least)}, and at most 365d, or None for lease_duration"
        )
        found.append(PolicyProblem("bad-lease", "lease", lease, rule))
    found.sort(key=lambda problem: _ORDER.index(problem.code))
    fix = f"fix the declaration in module {declaration.module}"
    return [
        Problem(declaration.name, declaration.module, problem.code, f"{problem.text()}; {fix}")
        for problem in found
    ]


@dataclass(frozen=True)
class PolicyProblem:
    """One policy value the host cannot honour; ``field`` as declared (``retry.backoff``)."""

    code: str
    field: str
    value: object
    rule: str

    def text(self) -> str:
        value = self.value
        shown = format_duration(value) if isinstance(value, timedelta) else repr(value)
        return f"{self.field} = {shown}: {self.rule}"


def policy_problems(declaration: BackgroundJobDeclaration) -> list[PolicyProblem]:
    """The policy values no host could honour whatever its settings, for declared and runtime
    jobs alike."""
    d = declaration
    limits = _judged(
        d.timeout, d.misfire_grace, d.catch_up_limit, d.overdue_after, d.max_concurrent
    )
    return [*limits, *_judged_retry(d.retry)]


# The order problems are listed in, as a reader meets the fields.
_ORDER = ("bad-timeout", "bad-lease", "bad-misfire", "bad-overlap", "bad-retry")


@lru_cache(maxsize=4096)
def _judged(
    timeout: timedelta | None,
    misfire_grace: timedelta | None,
    catch_up_limit: int,
    overdue_after: timedelta | None,
    max_concurrent: int,
) -> tuple[PolicyProblem, ...]:
    # Kept per distinct set of values: a catalog of 10,000 jobs has a handful of policies.
    problems: list[PolicyProblem] = []

    def add(code: str, field: str, value: object, rule: str) -> None:
        problems.append(PolicyProblem(code, field, value, rule))

    if timeout is not None and not timedelta(0) < timeout <= MAX_DURATION:
        add("bad-timeout", "timeout", timeout, "must be positive and at most 365d, or None")
    if misfire_grace is not None and not timedelta(0) < misfire_grace <= MAX_DURATION:
        rule = "must be positive and at most 365d, or None"
        add("bad-misfire", "misfire_grace", misfire_grace, rule)
    if not 1 <= catch_up_limit <= MAX_CATCH_UP:
        add("bad-misfire", "catch_up_limit", catch_up_limit, f"must be 1 to {MAX_CATCH_UP}")
    if overdue_after is not None and not timedelta(0) <= overdue_after <= MAX_DURATION:
        add("bad-misfire", "overdue_after", overdue_after, "must be 0s to 365d, or None")
    if not 1 <= max_concurrent <= MAX_CONCURRENT:
        add("bad-overlap", "max_concurrent", max_concurrent, f"must be 1 to {MAX_CONCURRENT}")
    return tuple(problems)


@lru_cache(maxsize=4096)
def _judged_retry(retry: RetryPolicy) -> tuple[PolicyProblem, ...]:
    problems: list[PolicyProblem] = []

    def add(field: str, value: object, rule: str) -> None:
        problems.append(PolicyProblem("bad-retry", f"retry.{field}", value, rule))

    if not 1 <= retry.max_attempts <= MAX_ATTEMPTS:
        rule = f"must be 1 (no retry) to {MAX_ATTEMPTS}; it counts the first"
        add("max_attempts", retry.max_attempts, rule)
    if not timedelta(0) <= retry.backoff <= MAX_DURATION:
        add("backoff", retry.backoff, "must be 0s to 365d")
    if not timedelta(0) <= retry.backoff_max <= MAX_DURATION:
        add("backoff_max", retry.backoff_max, "must be 0s to 365d")
    elif retry.backoff_max < retry.backoff:
        rule = f"must not be shorter than backoff ({format_duration(retry.backoff)})"
        add("backoff_max", retry.backoff_max, rule)
    if not 0 <= retry.jitter <= 1:
        add("jitter", retry.jitter, "must be 0 to 1 (a fraction of the delay)")
    unknown = sorted(str(o) for o in retry.retry_on if o not in RETRYABLE_OUTCOMES)
    if unknown:
        allowed = ", ".join(sorted(RETRYABLE_OUTCOMES))
        rule = f"names no outcome a run can end with; allowed: {allowed}"
        add("retry_on", unknown, rule)
    return tuple(problems)


def effective_group(
    declaration: BackgroundJobDeclaration, override: JobOverride | None
) -> str | None:
    if override is not None and override.concurrency_group is not None:
        return override.concurrency_group or None
    return declaration.concurrency_group


def check_group(
    declaration: BackgroundJobDeclaration, override: JobOverride | None, settings: Settings
) -> list[Problem]:
    group = effective_group(declaration, override)
    if group is None:
        return []
    from_override = override is not None and override.concurrency_group is not None
    where = (
        f"{section(declaration.name)} in the configuration"
        if from_override
        else f"the declaration in module {declaration.module}"
    )
    limits = settings.concurrency_limits
    if not GROUP_NAME.fullmatch(group):
        code = "bad-concurrency-group"
        message = (
            f"concurrency_group = {group!r} is not a group name (1 to 100 lower-case letters, "
            f"digits, '.', '_' or '-'); fix it in {where}"
        )
    elif group in limits:
        return []
    else:
        close = suggest(group, list(limits))
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        code = "unknown-concurrency-group"
        message = (
            f"concurrency_group = {group!r} names a group with no limit{hint}; add "
            f"'{group} = N' under [concurrency_limits] in the configuration, or fix the "
            f"group name in {where}"
        )
    return [Problem(declaration.name, declaration.module, code, message)]


def unused_limits(limits: Mapping[str, int], used: Iterable[str | None]) -> list[Problem]:
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
