"""What a module says about one of its jobs: a stable name, a trigger, and its policies.

Construction checks types only. Whether a cron expression parses, a zone exists or a name follows
the naming rule is decided by the host's catalog validation, so that every problem in every module
is reported together instead of the first one raising out of a plugin hook.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

__all__ = [
    "BackgroundJobDeclaration",
    "DstGap",
    "DstRepeat",
    "MisfirePolicy",
    "OverlapPolicy",
    "RetryPolicy",
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
class BackgroundJobDeclaration:
    """One recurring job, as its module declares it.

    ``name`` is the stable identity (``module.job-name``, lower case) used by alerts, the audit
    trail, configuration overrides and the CLI; it never changes with a class rename. An enabled
    job has exactly one of ``cron`` (5 fields, or 6 with leading seconds) and ``interval``.
    """

    name: str
    module: str
    cron: str | None = None
    interval: timedelta | None = None
    timezone: str = "UTC"
    enabled: bool = True
    critical: bool = False
    configuration_source: str | None = None
    description: str = ""
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    catch_up_limit: int = 10
    misfire_grace: timedelta | None = None
    overlap: OverlapPolicy = OverlapPolicy.FORBID
    max_concurrent: int = 1
    retry: RetryPolicy = field(default_factory=lambda: _NO_RETRY)
    timeout: timedelta | None = None
    lease: timedelta | None = None
    """How long a claim holds before another replica may take the job over; None: host default."""
    overdue_after: timedelta | None = None
    """Grace beyond the job's period before the dead-man check calls it overdue; None: default."""
    dst_gap: DstGap = DstGap.SHIFT
    """A fixed-time cron job's local time skipped by a spring-forward: shift or skip."""
    dst_repeat: DstRepeat = DstRepeat.ONCE
    """A fixed-time cron job's local time repeated by a fall-back: once, first, second, both."""
    concurrency_group: str | None = None
    """A group whose limit (``[concurrency_limits]``) holds across every replica; None: none."""

    def __post_init__(self) -> None:
        _check_types(self)


_EXPECTED: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "module": (str,),
    "cron": (str, type(None)),
    "interval": (timedelta, type(None)),
    "timezone": (str,),
    "enabled": (bool,),
    "critical": (bool,),
    "configuration_source": (str, type(None)),
    "description": (str,),
    "misfire": (MisfirePolicy,),
    "catch_up_limit": (int,),
    "misfire_grace": (timedelta, type(None)),
    "overlap": (OverlapPolicy,),
    "max_concurrent": (int,),
    "retry": (RetryPolicy,),
    "timeout": (timedelta, type(None)),
    "lease": (timedelta, type(None)),
    "overdue_after": (timedelta, type(None)),
    "dst_gap": (DstGap,),
    "dst_repeat": (DstRepeat,),
    "concurrency_group": (str, type(None)),
    "max_attempts": (int,),
    "backoff": (timedelta,),
    "backoff_max": (timedelta,),
    "jitter": (int, float),
    "retry_on": (frozenset,),
}


def _check_types(instance: Any) -> None:
    kind = type(instance)
    checks = _CHECKS.get(kind)
    if checks is None:
        checks = _CHECKS[kind] = tuple(
            (f.name, _EXPECTED[f.name], frozenset(_EXPECTED[f.name]))
            for f in dataclasses.fields(kind)
        )
    for name, expected, exact in checks:
        value = getattr(instance, name)
        # A value of exactly an expected type passes at once: declaring 10,000 jobs checks
        # 200,000 fields. Only a subclass (or a wrong type) takes the longer look.
        if type(value) in exact:
            continue
        # bool is an int; a flag where a count belongs is a mistake worth naming.
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
            raise TypeError(
                f"{kind.__name__}.{name} must be {names}, got {type(value).__name__} {value!r}"
            )


_CHECKS: dict[type, tuple[tuple[str, tuple[type, ...], frozenset[type]], ...]] = {}


_NO_RETRY: RetryPolicy = RetryPolicy()
"""The default policy, shared: it is immutable, and checking a fresh one per job cost time."""
