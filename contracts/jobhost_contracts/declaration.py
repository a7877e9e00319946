"""What a module says about one of its jobs: a stable name, a trigger, and its policies.

Construction checks types only; the host's catalog validation checks the rest, so that every
problem in every module is reported together instead of the first raising out of a plugin hook.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

__all__ = [
    "CALL_TIMEOUT_MARGIN",
    "POLICY_KEYS",
    "SCHEDULE_KEYS",
    "BackgroundJobDeclaration",
    "DstGap",
    "DstRepeat",
    "JobPolicies",
    "MisfirePolicy",
    "OverlapPolicy",
    "RetryPolicy",
    "check_trigger",
    "configured_declaration",
    "field_types",
    "policies_from",
    "policy_values",
]


class MisfirePolicy(StrEnum):
    """What the host does with occurrences it could not fire on time (downtime, pause)."""

    RUN_ONCE = "run_once"
    """Run once for all missed occurrences, then move on to the next future one (default)."""
    CATCH_UP = "catch_up"
    """Run every missed occurrence in order, up to the declaration's ``catch_up_limit``."""
    SKIP = "skip"
    """Run an occurrence only while it is no older than ``misfire_grace``."""


class OverlapPolicy(StrEnum):
    """What happens when an occurrence falls due while an earlier run of the job still runs."""

    FORBID = "forbid"
    """The new occurrence is recorded ``skipped`` (default)."""
    ALLOW = "allow"
    """Runs go side by side, up to the declaration's ``max_concurrent``."""


class DstGap(StrEnum):
    """What a fixed-time cron job does when its local time is skipped by a spring-forward."""

    SHIFT = "shift"
    """Run once at the first instant after the gap (Debian cron's rule; default)."""
    SKIP = "skip"
    """Do not run that day; the occurrence is recorded ``missed``: it does not exist."""


class DstRepeat(StrEnum):
    """What a fixed-time cron job does when its local time occurs twice in a fall-back."""

    ONCE = "once"
    """Run once, on the first pass (Debian cron's rule; default)."""
    FIRST = "first"
    """Run on the first (daylight-time) pass only: the same as ``once``, said explicitly."""
    SECOND = "second"
    """Run on the second (standard-time) pass only."""
    BOTH = "both"
    """Run on both passes: two occurrences an hour (or the shift) apart."""


_RETRYABLE_DEFAULT = frozenset({"failed", "timed_out", "abandoned"})


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often, and how soon, a failed attempt at one occurrence is tried again.

    ``max_attempts`` counts the first attempt: 1 means no retry. The n-th retry waits
    ``backoff * 2**(n-1)``, capped at ``backoff_max``, spread by up to ``jitter`` of itself.
    """

    max_attempts: int = 1
    backoff: timedelta = timedelta(seconds=30)
    backoff_max: timedelta = timedelta(hours=1)
    jitter: float = 0.1
    retry_on: frozenset[str] = _RETRYABLE_DEFAULT

    def __post_init__(self) -> None:
        _check_types(self)


@dataclass(frozen=True, kw_only=True)
class JobPolicies:
    """When a job runs and how: its trigger and every policy, each defined here once.

    A declaration is these and the job's identity. Written out (a ``[[modules.NAME.jobs]]``
    entry, a runtime job's definition, the policies the host shows) they are flat: the retry
    policy's fields stand beside the others, as :func:`policy_values` gives them and
    :func:`policies_from` takes them back.
    """

    cron: str | None = None
    interval: timedelta | None = None
    timezone: str = "UTC"
    enabled: bool = True
    critical: bool = False
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    catch_up_limit: int = 10
    misfire_grace: timedelta | None = None
    overlap: OverlapPolicy = OverlapPolicy.FORBID
    max_concurrent: int = 1
    timeout: timedelta | None = None
    lease: timedelta | None = None
    """How long a claim holds before another replica may take the job over; None: host default."""
    overdue_after: timedelta | None = None
    """Grace beyond the job's period before the dead-man check calls it overdue; None: default."""
    retry: RetryPolicy = field(default_factory=lambda: _NO_RETRY)
    dst_gap: DstGap = DstGap.SHIFT
    """A fixed-time cron job's local time skipped by a spring-forward: shift or skip."""
    dst_repeat: DstRepeat = DstRepeat.ONCE
    """A fixed-time cron job's local time repeated by a fall-back: once, first, second, both."""
    concurrency_group: str | None = None
    """A group whose limit (``[concurrency_limits]``) holds across every replica; None: none."""

    def __post_init__(self) -> None:
        _check_types(self)


@dataclass(frozen=True, kw_only=True, repr=False)
class BackgroundJobDeclaration(JobPolicies):
    """One recurring job, as its module declares it: its identity and its :class:`JobPolicies`.

    ``name`` is the stable identity (``module.job-name``, lower case) used by alerts, the audit
    trail, configuration overrides and the CLI; it never changes with a class rename. An enabled
    job has exactly one of ``cron`` (5 fields, or 6 with leading seconds) and ``interval``.
    """

    name: str
    module: str
    configuration_source: str | None = None
    description: str = ""

    def __repr__(self) -> str:
        # The identity first: a message that cuts the text short still names the job.
        names = ("name", "module", *field_types(JobPolicies), "configuration_source", "description")
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"BackgroundJobDeclaration({shown})"


@functools.cache
def field_types(kind: type) -> Mapping[str, tuple[type, ...]]:
    """The types each field of the dataclass ``kind`` takes, in the fields' order: ``NoneType``
    for an optional one, ``int`` beside ``float``, the bare class of a generic (``frozenset``)."""
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)
    return types.MappingProxyType({f.name: _accepted(hints[f.name]) for f in fields})


def policy_values(policies: JobPolicies) -> dict[str, Any]:
    """Every policy of ``policies`` by its flat key (:data:`POLICY_KEYS`), in order."""
    retry = policies.retry
    return {key: getattr(retry if key in _RETRY_FIELDS else policies, key) for key in POLICY_KEYS}


def policies_from(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :class:`JobPolicies` (or a declaration) for the flat
    ``values``: the retry policy's keys make its ``retry``; a key left out keeps its default.

    Raises ``TypeError`` naming a key that is no policy.
    """
    unknown = ", ".join(str(key) for key in values if key not in POLICY_KEYS)
    if unknown:
        raise TypeError(f"{unknown} is not a policy; the policies are {', '.join(POLICY_KEYS)}")
    policies = {key: value for key, value in values.items() if key not in _RETRY_FIELDS}
    retry = {key: value for key, value in values.items() if key in _RETRY_FIELDS}
    return {**policies, "retry": RetryPolicy(**retry)} if retry else policies


def _accepted(hint: Any) -> tuple[type, ...]:
    parts = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    accepted = tuple(typing.get_origin(part) or part for part in parts)
    return (int, *accepted) if float in accepted else accepted


def _check_types(instance: Any) -> None:
    kind: type = type(instance)
    for name, expected in field_types(kind).items():
        value = getattr(instance, name)
        # A value of exactly an expected type passes at once: declaring 10,000 jobs checks
        # 200,000 fields. Only a subclass (or a wrong type) takes the longer look.
        if type(value) in expected:
            continue
        # bool is an int; a flag where a count belongs is a mistake worth naming.
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
            raise TypeError(
                f"{kind.__name__}.{name} must be {names}, got {type(value).__name__} {value!r}"
            )


_NO_RETRY: RetryPolicy = RetryPolicy()
"""The default policy, shared: it is immutable, and checking a fresh one per job cost time."""
_RETRY_FIELDS = field_types(RetryPolicy)

POLICY_KEYS: Mapping[str, tuple[type, ...]] = types.MappingProxyType(
    {
        key: accepted
        for name, own in field_types(JobPolicies).items()
        for key, accepted in (_RETRY_FIELDS if name == "retry" else {name: own}).items()
    }
)
"""The flat keys of the policies, in order, with the types each takes: :class:`JobPolicies`'s
fields, with ``retry``'s in its place."""

CALL_TIMEOUT_MARGIN = timedelta(seconds=5)
"""A run's timeout is its call's plus this: the call gives up first and says why."""

# The timeout follows from the call's; the others are for a module's code to declare.
_NOT_CONFIGURED = frozenset(
    {
        *("timeout", "lease", "overdue_after", "jitter", "retry_on"),
        *("dst_gap", "dst_repeat", "concurrency_group"),
    }
)

SCHEDULE_KEYS = frozenset(POLICY_KEYS) - _NOT_CONFIGURED
"""The keys of an entry about when its job runs and how it is retried, beside ``name``,
``description`` and what the job does."""


def configured_declaration(
    *,
    name: str,
    section: str,
    description: str,
    call_timeout: timedelta,
    **schedule: Any,
) -> BackgroundJobDeclaration:
    """The declaration of one entry of ``[modules.SECTION]``: the job belongs to the module
    ``section``, its configuration source is that section, its run may take ``call_timeout``
    plus :data:`CALL_TIMEOUT_MARGIN`, and ``schedule`` holds its :data:`SCHEDULE_KEYS`."""
    unknown = sorted(set(schedule) - SCHEDULE_KEYS)
    if unknown:
        raise TypeError(
            f"configured_declaration() takes no {', '.join(unknown)}; its schedule keys are "
            f"{', '.join(sorted(SCHEDULE_KEYS))}"
        )
    return BackgroundJobDeclaration(
        name=name,
        module=section,
        configuration_source=section,
        description=description,
        timeout=call_timeout + CALL_TIMEOUT_MARGIN,
        **policies_from(schedule),
    )


def check_trigger(
    cron: str | None, interval: timedelta | None, *, enabled: bool, examples: tuple[str, str]
) -> None:
    """Raise ``ValueError`` unless an entry has exactly one of ``cron`` and ``interval``; a
    disabled one may have neither. ``examples`` (a cron expression, an interval) show what to
    write."""
    if cron is not None and interval is not None:
        raise ValueError("has both cron and interval; keep exactly one")
    if enabled and cron is None and interval is None:
        raise ValueError(f"needs cron (e.g. {examples[0]!r}) or interval (e.g. {examples[1]!r})")
