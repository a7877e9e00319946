"""Calling a hook one plugin at a time, so each answer and each failure keeps its plugin's name
(pluggy's own call stops at the first plugin that raises), and checking each answer's shape."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jobhost_contracts import AuditSink, JobKind, ModuleSettingsError, bound_text, redact_text

from jobhost.config import short_repr
from jobhost.plugins.discovery import PluginProblem, PluginSet

__all__ = [
    "KindSet",
    "PluginJob",
    "collect_audit_sinks",
    "collect_jobs",
    "collect_kinds",
    "read_only",
]


@dataclass(frozen=True)
class PluginJob:
    """One (declaration, executor) pair as a plugin returned it: either side may be anything
    until the catalog's validation checks it."""

    plugin: str
    declaration: object
    executor: object


def collect_jobs(
    plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]
) -> tuple[list[PluginJob], list[PluginProblem]]:
    """Ask every plugin for its jobs; a bad item is reported, the well-formed pairs kept."""
    problems: list[PluginProblem] = []
    jobs: list[PluginJob] = []
    for plugin, position, item in _items(plugins, modules, "jobhost_jobs", _JOBS_WANTED, problems):
        if isinstance(item, tuple) and len(item) == 2:
            jobs.append(PluginJob(plugin, item[0], item[1]))
        else:
            problems.append(
                _bad_result(
                    plugin,
                    f"jobhost_jobs item {position} is {_describe(item)}, not a "
                    "(declaration, executor) pair; return JobRegistration(declaration, "
                    "executor) or a 2-tuple for each job",
                )
            )
    return jobs, problems


def collect_audit_sinks(
    plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]
) -> tuple[list[AuditSink], list[PluginProblem]]:
    problems: list[PluginProblem] = []
    sinks: list[AuditSink] = []
    wanted = "a list of audit sinks; return [] when the module has none"
    for plugin, position, item in _items(plugins, modules, "jobhost_audit_sinks", wanted, problems):
        if isinstance(item, AuditSink) and callable(getattr(item, "record", None)):
            sinks.append(item)
        else:
            problems.append(
                _bad_result(
                    plugin,
                    f"jobhost_audit_sinks item {position} is {_describe(item)}, not an audit "
                    "sink; return objects with a `name` and a `record(entry)` method",
                )
            )
    return sinks, problems


@dataclass(frozen=True)
class KindSet:
    kinds: dict[str, JobKind] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)


def collect_kinds(plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]) -> KindSet:
    found = KindSet()
    offered_by: dict[str, str] = {}
    wanted = "a list of JobKind; return [] when the module offers none"
    for plugin, position, item in _items(
        plugins, modules, "jobhost_job_kinds", wanted, found.problems
    ):
        if not isinstance(item, JobKind):
            problem = (
                f"jobhost_job_kinds item {position} is {type(item).__name__}, not a JobKind; "
                "return jobhost_contracts.JobKind objects"
            )
            found.problems.append(_bad_result(plugin, problem))
        elif item.name in offered_by:
            problem = (
                f"job kind {item.name!r} is offered by plugin {offered_by[item.name]} already; "
                "rename one of them"
            )
            found.problems.append(_bad_result(plugin, problem))
        else:
            found.kinds[item.name] = item
            offered_by[item.name] = plugin
    return found


def read_only(modules: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    """The ``[modules.NAME]`` sections as a read-only view, all the way down: a write into a
    section would change what every other module and every later run sees."""
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


def _items(
    plugins: PluginSet,
    modules: Mapping[str, Mapping[str, Any]],
    hook: str,
    wanted: str,
    problems: list[PluginProblem],
) -> Iterator[tuple[str, int, object]]:
    """(plugin, position, item) for every item the plugins' ``hook`` returned (``wanted`` says
    what that should be), each implementation called in load order with the arguments it asks
    for; each failure is added to ``problems``."""
    kwargs = {"settings": read_only(modules)}
    answers: list[tuple[str, object]] = []
    impls = getattr(plugins.manager.hook, hook).get_hookimpls()
    for impl in sorted(impls, key=lambda impl: plugins.order(impl.plugin_name)):
        if impl.hookwrapper or impl.wrapper:
            problems.append(
                PluginProblem(
                    impl.plugin_name,
                    "plugin-hook",
                    f"{hook} is a hook wrapper; jobhost calls each plugin's hook on its "
                    "own, so implement it as a plain @hookimpl",
                )
            )
            continue
        try:
            value = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except (Exception, SystemExit) as error:  # the plugin's own code: reported, not raised
            problems.append(_raised(impl.plugin_name, hook, error))
            continue
        answers.append((impl.plugin_name, value))
    for plugin, value in answers:
        for position, item in enumerate(_materialise(plugin, value, problems, hook, wanted)):
            yield plugin, position, item


def _materialise(
    plugin: str, value: object, problems: list[PluginProblem], hook: str, wanted: str
) -> list[object]:
    if inspect.iscoroutine(value):
        # Closed so the never-awaited coroutine does not also raise a RuntimeWarning.
        value.close()
        problems.append(
            _bad_result(
                plugin,
                f"{hook} is async and returned a coroutine; make it a plain function "
                "(it must be cheap and connect to nothing)",
            )
        )
        return []
    if value is None or isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        problems.append(_bad_result(plugin, f"{hook} returned {_describe(value)}, not {wanted}"))
        return []
    try:
        # A generator runs the plugin's code while it is consumed: that is still the hook.
        return list(value)
    except (Exception, SystemExit) as error:
        problems.append(_raised(plugin, hook, error))
        return []


def _bad_result(plugin: str, message: str) -> PluginProblem:
    return PluginProblem(plugin, "plugin-bad-result", message)


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
    return "None" if value is None else f"{type(value).__name__} {short_repr(value)}"
