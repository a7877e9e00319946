"""The checks a job must pass before the host will run it, each returning every problem it finds
(never only the first), each message ending with the fix and where it goes.

An executor (an object with ``execute(context)``, or a function) is checked to take the run's
context, so ``execute(self)`` is a catalog problem, not a ``TypeError`` at the first run at 3 a.m.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jobhost_contracts import BackgroundJobDeclaration

from jobhost.catalog.model import (
    NAME_PATTERN,
    NAME_RULE,
    EffectiveTrigger,
    Problem,
    chosen_dst_policy,
)
from jobhost.catalog.overrides import TriggerParts, section, to_trigger
from jobhost.config import format_duration
from jobhost.plugins.calls import PluginJob
from jobhost.triggers import (
    CronNeverFiresError,
    CronSyntaxError,
    UnknownTimezoneError,
    cron_schedule,
    load_zone,
)

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = [
    "TriggerChecks",
    "UsesStore",
    "check_critical",
    "check_name",
    "check_prefix",
    "check_trigger",
    "pair_problems",
]

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
    elif not _is_executor(executor):
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
    zone_ok = _check_zone(parts, problems)
    fixed_time = False
    if parts.cron is not None:
        fixed_time = _check_cron(parts, parts.timezone if zone_ok else "UTC", problems)
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
        self._triggers: dict[TriggerParts, EffectiveTrigger | None] = {}

    def problems(self, parts: TriggerParts) -> list[Problem]:
        key = _trigger_key(parts)
        if key in self._sound:
            return []
        found = check_trigger(parts)
        if not found:
            self._sound.add(key)
        return found

    def trigger(self, parts: TriggerParts) -> EffectiveTrigger | None:
        key = _trigger_key(parts)
        if key not in self._triggers:
            self._triggers[key] = to_trigger(parts)
        return self._triggers[key]


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


def _check_zone(parts: TriggerParts, problems: list[Problem]) -> bool:
    try:
        load_zone(parts.timezone)
    except UnknownTimezoneError as error:
        problems.append(_problem(parts, "unknown-timezone", f"{error}; {_zone_fix(parts)}"))
        return False
    return True


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
    except UnknownTimezoneError as error:
        problems.append(_problem(parts, "unknown-timezone", f"{error}; {_zone_fix(parts)}"))
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


def _is_executor(executor: object) -> bool:
    # A class has a callable execute too, but calling it unbound would fail at the first run.
    if isinstance(executor, type):
        return False
    return callable(getattr(executor, "execute", None)) or callable(executor)


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


@functools.lru_cache(maxsize=1024)
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
