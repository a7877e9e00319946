"""The checks a job must pass before the host will run it, each returning every problem it finds
(never only the first), each message ending with the fix and where it goes: the declaration, or
the deployment's ``[jobs."name"]`` override (applied here, remembering where each part came from).

An executor is checked to take the run's context, so ``execute(self)`` is a catalog problem, not
a ``TypeError`` at the first run at 3 a.m. The declaration checks its policies' types; their
values are judged here with the settings in hand. A concurrency group without a
``[concurrency_limits]`` entry would run unlimited, so it keeps the host from starting; a limit
no job uses is only a warning (a job may be disabled or removed for a while).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from jobhost_contracts import (
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    RetryPolicy,
    format_duration,
)

from jobhost.catalog.model import (
    NAME_PATTERN,
    NAME_RULE,
    EffectiveTrigger,
    Problem,
    chosen_dst_policy,
    suggest,
)
from jobhost.config import GROUP_NAME, LEASE_HEARTBEATS, MAX_DURATION, JobOverride, Settings
from jobhost.triggers import (
    CronNeverFiresError,
    CronSyntaxError,
    UnknownTimezoneError,
    cron_schedule,
    load_zone,
)

if TYPE_CHECKING:
    from jobhost.plugins import PluginJob
    from jobhost.store import Store

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_CATCH_UP",
    "MAX_CONCURRENT",
    "POLICY_CODES",
    "RETRYABLE_OUTCOMES",
    "TriggerChecks",
    "TriggerParts",
    "UsesStore",
    "check_critical",
    "check_group",
    "check_name",
    "check_policies",
    "check_prefix",
    "check_trigger",
    "declared_parts",
    "effective_group",
    "effective_parts",
    "pair_problems",
    "policy_problems",
    "to_trigger",
    "unknown_overrides",
    "unused_limits",
]

Origin = Literal["declaration", "override", "api"]  # api: a runtime job's definition


@dataclass(frozen=True)
class TriggerParts:
    """A job's trigger before it is known to be valid: both, one or neither of cron and interval
    (an override replaces them together)."""

    name: str
    module: str
    cron: str | None
    interval: timedelta | None
    timezone: str
    enabled: bool
    dst_gap: DstGap
    dst_repeat: DstRepeat
    trigger_from: Origin
    zone_from: Origin
    enabled_from: Origin
    dst_from: Origin


_PARTS = tuple(part.name for part in fields(TriggerParts))


def declared_parts(
    declaration: BackgroundJobDeclaration, origin: Origin = "declaration"
) -> TriggerParts:
    """What the declaration alone says, every part from ``origin``."""
    said: dict[str, Any] = {
        part: origin if part.endswith("_from") else getattr(declaration, part) for part in _PARTS
    }
    return TriggerParts(**said)


def effective_parts(parts: TriggerParts, override: JobOverride | None) -> TriggerParts:
    if override is None:
        return parts
    changes: dict[str, Any] = {}
    if override.cron is not None or override.interval is not None:
        # Both set is an override-both-triggers problem; keeping both lets validation say so.
        changes.update(cron=override.cron, interval=override.interval, trigger_from="override")
    if override.timezone is not None:
        changes.update(timezone=override.timezone, zone_from="override")
    if override.enabled is not None:
        changes.update(enabled=override.enabled, enabled_from="override")
    if override.dst_gap is not None or override.dst_repeat is not None:
        changes.update(
            dst_gap=override.dst_gap or parts.dst_gap,
            dst_repeat=override.dst_repeat or parts.dst_repeat,
            dst_from="override",
        )
    return replace(parts, **changes)


def to_trigger(parts: TriggerParts) -> EffectiveTrigger | None:
    """The single trigger ``parts`` describe; None when they hold both a cron and an interval."""
    source: Origin = (
        "override"
        if "override" in (parts.trigger_from, parts.zone_from, parts.dst_from)
        else parts.trigger_from
    )
    if parts.cron is not None and parts.interval is not None:
        return None
    if parts.cron is not None:
        return EffectiveTrigger(
            "cron", parts.cron, None, parts.timezone, source, parts.dst_gap, parts.dst_repeat
        )
    if parts.interval is not None:
        expression = format_duration(parts.interval)
        return EffectiveTrigger("interval", expression, parts.interval, parts.timezone, source)
    return EffectiveTrigger(None, None, None, parts.timezone, source)


def unknown_overrides(
    overrides: Mapping[str, JobOverride], declared: Collection[str], *, plugins_failed: int
) -> list[Problem]:
    """An ``unknown-override`` for every override naming a job nobody declares (a typo would
    leave the job on its declared schedule while the operator believes it changed)."""
    problems: list[Problem] = []
    for name in overrides:
        if name in declared:
            continue
        close = suggest(name, list(declared))
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        if not declared:
            hint = "; no jobs are declared at all"
        if plugins_failed:
            hint += (
                f" ({plugins_failed} plugin(s) failed to load and may declare it; "
                "see the plugin problems)"
            )
        message = (
            f"{section(name)} overrides a job that no module declares{hint}; fix the name or "
            "remove the section"
        )
        problems.append(Problem(name, None, "unknown-override", message))
    return problems


def section(name: str) -> str:
    return f'[jobs."{name}"]'


MAX_INTERVAL = timedelta(days=3650)  # added to instants, which must stay within a calendar


def pair_problems(job: PluginJob) -> list[Problem]:
    """Why a (declaration, executor) pair is unusable: a side missing or of the wrong kind."""
    problems: list[Problem] = []
    declaration, executor = job.declaration, job.executor
    if isinstance(declaration, BackgroundJobDeclaration):
        name: str | None = declaration.name
        module: str | None = declaration.module
    else:
        name, module = None, job.plugin
        got = "None" if declaration is None else f"a {type(declaration).__name__}"
        message = (
            f"returned {got} where a BackgroundJobDeclaration belongs, paired with executor "
            f"{_kind(executor)}; pair every executor with its declaration"
        )
        problems.append(Problem(None, module, "missing-declaration", message))
    if executor is None:
        message = (
            f"declared without an executor (plugin {job.plugin} paired it with None); pair it "
            "with an object whose execute(context) runs the job"
        )
        problems.append(Problem(name, module, "missing-executor", message))
    # A class has a callable execute too, but calling it unbound would fail at the first run.
    elif isinstance(executor, type) or not (
        callable(getattr(executor, "execute", None)) or callable(executor)
    ):
        problems.append(Problem(name, module, "bad-executor", _bad_executor(executor)))
    elif (wrong := _signature_problem(executor)) is not None:
        problems.append(Problem(name, module, "bad-executor", wrong))
    return problems


@runtime_checkable
class UsesStore(Protocol):
    """An executor of the host's own (the run retention job), handed the store of the host
    that runs it."""

    def use_store(self, store: Store) -> None: ...


def check_name(declaration: BackgroundJobDeclaration) -> list[Problem]:
    if NAME_PATTERN.fullmatch(declaration.name):
        return []
    message = (
        f"job name {declaration.name!r} does not follow the naming rule: {NAME_RULE}; "
        "rename it in the declaration"
    )
    return [Problem(declaration.name, declaration.module, "bad-name", message)]


def check_prefix(declaration: BackgroundJobDeclaration) -> list[Problem]:
    """``name-outside-module`` for a well-formed name that does not start with its module's:
    a warning, since the http and publish modules keep a dotted name as written, and a rename
    loses a job's history."""
    name, module = declaration.name, declaration.module
    if name.startswith(f"{module}.") or not NAME_PATTERN.fullmatch(name):
        return []
    rest = name.split(".", 1)[1]
    message = (
        f"job name {name!r} does not start with its module's name ({module}.): a name is the "
        "module, then the job, so that alerts, configuration and the CLI say whose job it is; "
        f"rename it {module}.{rest} in the declaration (its history stays under the old name), "
        "or declare it in the module its name starts with"
    )
    return [Problem(name, module, "name-outside-module", message)]


def check_trigger(parts: TriggerParts) -> list[Problem]:
    """Every problem with one set of trigger parts: presence, zone, expression, interval."""
    problems: list[Problem] = []
    where = section(parts.name)
    if parts.cron is not None and parts.interval is not None:
        if parts.trigger_from == "override":
            message = f"{where} sets both cron and interval; keep one of them"
            problems.append(_problem(parts, "override-both-triggers", message))
        else:
            message = "declares both a cron expression and an interval; declare exactly one"
            problems.append(_problem(parts, "both-triggers", message))
    elif parts.cron is None and parts.interval is None and parts.enabled:
        problems.append(_no_trigger(parts))
    timezone = parts.timezone
    try:
        load_zone(timezone)
    except UnknownTimezoneError as error:
        problems.append(_problem(parts, "unknown-timezone", f"{error}; {_zone_fix(parts)}"))
        timezone = "UTC"
    fixed_time = False
    if parts.cron is not None:
        fixed_time = _check_cron(parts, timezone, problems)
    if not fixed_time and (parts.cron is not None or parts.interval is not None):
        problems.extend(_unused_dst_policy(parts))
    interval = parts.interval
    if interval is not None and interval <= timedelta(0):
        fix = {
            "override": f'set a positive interval in {where}, e.g. interval = "6h"',
            "declaration": f"declare a positive interval, or set one in {where}",
            "api": "give a positive interval",
        }[parts.trigger_from]
        message = f"interval {format_duration(interval)} is not positive; {fix}"
        problems.append(_problem(parts, "non-positive-interval", message))
    if interval is not None and interval > MAX_INTERVAL:
        fix = {
            "override": f"set a shorter interval in {where}",
            "declaration": f"declare a shorter interval, or set one in {where}",
            "api": "give a shorter interval",
        }[parts.trigger_from]
        message = (
            f"interval {format_duration(interval)} is longer than the longest the schedule can "
            f"count in ({format_duration(MAX_INTERVAL)}); {fix}, e.g. "
            'interval = "30d", or a cron expression for a yearly job'
        )
        problems.append(_problem(parts, "interval-too-long", message))
    return problems


class TriggerChecks:
    """:func:`check_trigger` and ``to_trigger`` once per distinct sound trigger for one catalog
    (a trigger with problems is checked for each job, so each message names its own job)."""

    def __init__(self) -> None:
        self._sound: set[TriggerParts] = set()
        self._trigger = lru_cache(maxsize=None)(to_trigger)

    def problems(self, parts: TriggerParts) -> list[Problem]:
        key = _trigger_key(parts)
        if key in self._sound:
            return []
        found = check_trigger(parts)
        if not found:
            self._sound.add(key)
        return found

    def trigger(self, parts: TriggerParts) -> EffectiveTrigger | None:
        return self._trigger(_trigger_key(parts))


def _trigger_key(parts: TriggerParts) -> TriggerParts:
    # Everything but the job's name and module: what the checks and the trigger depend on.
    return replace(parts, name="", module="")


def check_critical(declaration: BackgroundJobDeclaration, effective: TriggerParts) -> list[Problem]:
    if not declaration.critical or effective.enabled:
        return []
    fix = {
        "override": f"remove enabled = false from {section(declaration.name)}",
        "declaration": "enable it in the declaration (or declare it not critical)",
        "api": 'set "enabled": true in the job\'s definition (or "critical": false)',
    }[effective.enabled_from]
    message = f"is critical but disabled; a critical job must run: {fix}"
    return [Problem(declaration.name, declaration.module, "critical-disabled", message)]


def _problem(parts: TriggerParts, code: str, message: str) -> Problem:
    return Problem(parts.name, parts.module, code, message)


def _no_trigger(parts: TriggerParts) -> Problem:
    where = section(parts.name)
    fix = {
        "override": f"set cron or interval in {where}, or remove enabled = true there",
        "declaration": "declare a cron expression or an interval, or declare the job disabled "
        f"(enabled=False); {where} can also set cron or interval",
        "api": "give a cron expression or an interval in the job's definition, or set "
        '"enabled": false',
    }[parts.enabled_from]
    return _problem(parts, "no-trigger", f"is enabled but has neither cron nor interval; {fix}")


def _check_cron(parts: TriggerParts, timezone: str, problems: list[Problem]) -> bool:
    """Whether it is a fixed-time job; what is wrong with the expression goes to ``problems``."""
    assert parts.cron is not None
    fix = {
        "override": f"fix cron in {section(parts.name)}",
        "declaration": f"fix the expression in the declaration or in {section(parts.name)}",
        "api": "fix the expression in the job's definition",
    }[parts.trigger_from]
    try:
        return cron_schedule(parts.cron, timezone).fixed_time
    except CronSyntaxError as error:
        # The error names the expression, the field, its text and the reason already.
        problems.append(_problem(parts, "cron-syntax", f"{error}; {fix}"))
    except CronNeverFiresError as error:
        problems.append(_problem(parts, "cron-never-fires", f"{error}; {fix}"))
    return False


def _unused_dst_policy(parts: TriggerParts) -> list[Problem]:
    """``dst-policy-unused``: a daylight-saving policy on a job that follows real time, which
    would ignore it silently."""
    chosen_policy = chosen_dst_policy(parts.dst_gap, parts.dst_repeat)
    chosen = [f"{name} = {value!r}" for name, value in chosen_policy.items()]
    if not chosen:
        return []
    if parts.cron is not None:
        kind = (
            f"cron {parts.cron!r} is a wildcard job (its minute or hour field starts with '*'), "
            "which follows real time"
        )
    else:
        kind = "an interval counts real time"
    where = {
        "override": section(parts.name),
        "declaration": "the declaration",
        "api": "the job's definition",
    }[parts.dst_from]
    message = (
        f"{' and '.join(chosen)} has no effect: {kind}; daylight-saving policies apply to "
        f"fixed-time cron jobs only, remove it from {where}"
    )
    return [_problem(parts, "dst-policy-unused", message)]


def _zone_fix(parts: TriggerParts) -> str:
    return {
        "override": f"fix timezone in {section(parts.name)}",
        "declaration": "fix the time zone in the declaration or set timezone in "
        f"{section(parts.name)}",
        "api": "fix the time zone in the job's definition",
    }[parts.zone_from]


def _signature_problem(executor: object) -> str | None:
    execute = getattr(executor, "execute", None)
    if callable(execute):
        function = getattr(execute, "__func__", None)
        if function is not None:
            # A method: checked once per class (the bound self is the first argument).
            return _method_problem(function, type(executor).__name__)
        return _call_problem(execute, f"{type(executor).__name__}.execute", skip_self=False)
    if callable(executor):
        name = getattr(executor, "__qualname__", None) or type(executor).__name__
        shown = f"function {name}" if inspect.isfunction(executor) else str(name)
        return _call_problem(executor, shown, skip_self=False)
    return None


def _bad_executor(executor: object) -> str:
    if isinstance(executor, type) and callable(getattr(executor, "execute", None)):
        return (
            f"executor is the class {executor.__name__}, not an instance; register "
            f"{executor.__name__}() instead"
        )
    return (
        f"executor {_kind(executor)} has no callable execute(context), so it does not satisfy "
        "IJobExecutor, and is not a function; pair the declaration with an object whose "
        "execute(context) runs the job, or with a function taking the context"
    )


@lru_cache(maxsize=1024)
def _method_problem(function: Callable[..., Any], owner: str) -> str | None:
    return _call_problem(function, f"{owner}.execute", skip_self=True)


def _call_problem(target: Callable[..., Any], name: str, *, skip_self: bool) -> str | None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: it will tell at run time
        return None
    try:
        signature.bind(*((None, None) if skip_self else (None,)))
    except TypeError:
        shown = signature.replace(return_annotation=inspect.Signature.empty)
        if skip_self:
            fix = "write def execute(self, context: JobContext) -> Result"
        else:
            short = getattr(target, "__name__", None) or "run"
            fix = f"write def {short}(context: JobContext) -> Result"
        return (
            f"executor {name}{shown} cannot be called with the run's context: the host calls it "
            f"with exactly one argument, the context; {fix}"
        )
    return None


def _kind(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"class {value.__name__}"
    return f"of type {type(value).__name__}"


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
