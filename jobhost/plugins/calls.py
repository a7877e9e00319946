"""Calling a hook one plugin at a time, so each answer and each failure keeps its plugin's name.

``manager.hook.jobhost_jobs(...)`` would stop at the first plugin that raises and lose who
answered what; here every implementation is called by hand. A later hook (``jobhost_audit_sinks``)
goes through :func:`call_each` the same way and adds its own shape check beside
:func:`collect_jobs`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jobhost_contracts import AuditSink, ModuleSettingsError, bound_text, redact_text

from jobhost.plugins.discovery import PluginProblem, PluginSet

__all__ = [
    "HookAnswer",
    "PluginJob",
    "call_each",
    "collect_audit_sinks",
    "collect_jobs",
    "read_only",
]


@dataclass(frozen=True)
class HookAnswer:
    """What one plugin's implementation of a hook returned."""

    plugin: str
    value: object


@dataclass(frozen=True)
class PluginJob:
    """One (declaration, executor) pair as a plugin returned it, not yet checked.

    Either side may be anything: whether it is a usable declaration and executor is decided by
    the catalog's validation, which reports every bad pair together.
    """

    plugin: str
    declaration: object
    executor: object


def call_each(
    plugins: PluginSet, hook_name: str, kwargs: Mapping[str, object]
) -> tuple[list[HookAnswer], list[PluginProblem]]:
    """Call every implementation of ``hook_name`` in load order; a raising one becomes a problem.

    Each implementation gets only the arguments it asked for, as pluggy would pass them.
    """
    caller = getattr(plugins.manager.hook, hook_name)
    answers: list[HookAnswer] = []
    problems: list[PluginProblem] = []
    impls = sorted(caller.get_hookimpls(), key=lambda impl: plugins.order(impl.plugin_name))
    for impl in impls:
        if impl.hookwrapper or impl.wrapper:
            problems.append(
                PluginProblem(
                    impl.plugin_name,
                    "plugin-hook",
                    f"{hook_name} is a hook wrapper; jobhost calls each plugin's hook on its "
                    "own, so implement it as a plain @hookimpl",
                )
            )
            continue
        try:
            value = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except (Exception, SystemExit) as error:  # the plugin's own code: reported, not raised
            problems.append(_raised(impl.plugin_name, hook_name, error))
            continue
        answers.append(HookAnswer(impl.plugin_name, value))
    return answers, problems


def collect_jobs(
    plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]
) -> tuple[list[PluginJob], list[PluginProblem]]:
    """Ask every plugin for its jobs, with ``modules`` as the read-only ``settings`` argument.

    A plugin whose answer is not an iterable of pairs is reported (``plugin-bad-result``); the
    pairs it did return well-formed are still collected.
    """
    answers, problems = call_each(plugins, "jobhost_jobs", {"settings": read_only(modules)})
    jobs: list[PluginJob] = []
    for answer in answers:
        items = _materialise(answer, problems)
        if items is None:
            continue
        for position, item in enumerate(items):
            if isinstance(item, tuple) and len(item) == 2:
                jobs.append(PluginJob(answer.plugin, item[0], item[1]))
            else:
                problems.append(
                    PluginProblem(
                        answer.plugin,
                        "plugin-bad-result",
                        f"jobhost_jobs item {position} is {_describe(item)}, not a "
                        "(declaration, executor) pair; return JobRegistration(declaration, "
                        "executor) or a 2-tuple for each job",
                    )
                )
    return jobs, problems


def collect_audit_sinks(
    plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]
) -> tuple[list[AuditSink], list[PluginProblem]]:
    """Ask every plugin for its audit sinks; anything that is not a sink is reported."""
    answers, problems = call_each(plugins, "jobhost_audit_sinks", {"settings": read_only(modules)})
    sinks: list[AuditSink] = []
    for answer in answers:
        items = _materialise(
            answer,
            problems,
            "jobhost_audit_sinks",
            "a list of audit sinks; return [] when the module has none",
        )
        for position, item in enumerate(items or []):
            if isinstance(item, AuditSink) and callable(getattr(item, "record", None)):
                sinks.append(item)
                continue
            problems.append(
                PluginProblem(
                    answer.plugin,
                    "plugin-bad-result",
                    f"jobhost_audit_sinks item {position} is {_describe(item)}, not an audit "
                    "sink; return objects with a `name` and a `record(entry)` method",
                )
            )
    return sinks, problems


def read_only(modules: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    """The ``[modules.NAME]`` sections as a read-only view, tables and lists inside included.

    A plugin or an executor that writes into its section would change what every other module
    and every later run sees; a view that refuses the write makes that mistake loud.
    """
    return MappingProxyType({name: _freeze(section) for name, section in modules.items()})


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


_JOBS_WANTED = (
    "an iterable of (declaration, executor) pairs; return a list of JobRegistration, or [] when "
    "there is nothing to run"
)


def _materialise(
    answer: HookAnswer,
    problems: list[PluginProblem],
    hook: str = "jobhost_jobs",
    wanted: str = _JOBS_WANTED,
) -> list[object] | None:
    """The items of a hook's answer; None, with the problem noted, when it is not a list.

    ``hook`` and ``wanted`` name the hook and what it should return, for the message.
    """
    value = answer.value
    if inspect.iscoroutine(value):
        # Closed so the never-awaited coroutine does not also raise a RuntimeWarning.
        value.close()
        problems.append(
            PluginProblem(
                answer.plugin,
                "plugin-bad-result",
                f"{hook} is async and returned a coroutine; make it a plain function "
                "(it must be cheap and connect to nothing)",
            )
        )
        return None
    if value is None or isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        problems.append(
            PluginProblem(
                answer.plugin,
                "plugin-bad-result",
                f"{hook} returned {_describe(value)}, not {wanted}",
            )
        )
        return None
    try:
        # A generator runs the plugin's code while it is consumed: that is still the hook.
        items: list[object] = list(value)
    except (Exception, SystemExit) as error:
        problems.append(_raised(answer.plugin, hook, error))
        return None
    return items


def _raised(plugin: str, hook_name: str, error: BaseException) -> PluginProblem:
    if isinstance(error, ModuleSettingsError):
        # The operator's section is wrong, not the plugin: the message is about the settings.
        listed = "; ".join(problem.describe() for problem in error.problems)
        return PluginProblem(
            plugin, "module-settings", bound_text(listed, 2000), section=error.section
        )
    if isinstance(error, SystemExit):
        what = f"called sys.exit({error.code!r})"
    else:
        what = f"raised {type(error).__name__}: {bound_text(redact_text(str(error)), 500)}"
    return PluginProblem(
        plugin,
        "plugin-hook",
        f"{hook_name} {what}; fix the plugin (the hook must not fail: declare a job disabled "
        "when its configuration is missing)",
    )


def _describe(value: object) -> str:
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
