"""Plugins: which modules offer jobs to this host, and what each of them returned. Every failure
is a :class:`PluginProblem` naming its plugin, never an exception.

Plugins are found and registered each on its own (installed entry points, and the ``plugins``
setting: import paths or ``.py`` files); a hook is called one plugin at a time, so each answer
and each failure keeps its plugin's name (pluggy's own call stops at the first plugin that
raises), and each answer's shape is checked.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pluggy
from jobhost_contracts import AuditSink, JobKind, ModuleSettingsError, bound_text, redact_text
from jobhost_contracts import hooks as contract_hooks
from jobhost_contracts.context import frozen
from jobhost_contracts.hooks import PROJECT_NAME

from jobhost.config import Settings, short_repr

__all__ = [
    "PluginJob",
    "PluginProblem",
    "PluginSet",
    "collect_audit_sinks",
    "collect_jobs",
    "collect_kinds",
    "load_plugins",
]

ENTRY_POINT_GROUP = PROJECT_NAME
# Allow-list of entry-point names to load (unset: all), to leave out a broken installed plugin.
LOAD_PLUGINS_ENV = "JOBHOST_LOAD_PLUGINS"

PluginProblemCode = Literal[
    "plugin-import",
    "plugin-hook",
    "plugin-unknown-hook",
    "plugin-bad-result",
    "plugin-no-hooks",
    "module-settings",
]


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that could not be used as it is; ``section`` is set for ``module-settings``
    (the plugin refused its ``[modules.SECTION]``: a problem of the configuration)."""

    plugin: str
    code: PluginProblemCode
    message: str
    section: str | None = None


@dataclass
class PluginSet:
    """The registered plugins, in load order, and what went wrong while loading the others."""

    manager: pluggy.PluginManager
    names: list[str] = field(default_factory=list)
    problems: list[PluginProblem] = field(default_factory=list)

    def order(self, plugin: str) -> int:
        return self.names.index(plugin) if plugin in self.names else len(self.names)


def load_plugins(settings: Settings, *, environ: Mapping[str, str] | None = None) -> PluginSet:
    """Register every plugin: entry points in name order, then ``settings.plugins`` in order
    (so "first declaration wins" is stable). ``environ`` is read for :data:`LOAD_PLUGINS_ENV`."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(contract_hooks)
    plugins = PluginSet(manager)
    raw = (os.environ if environ is None else environ).get(LOAD_PLUGINS_ENV)
    allowed = None if raw is None else {part.strip() for part in raw.split(",") if part.strip()}
    for name, entry_point in _entry_points(allowed, plugins):
        _register(plugins, name, entry_point.load, partial(_entry_point_failure, entry_point))
    for item in settings.plugins:
        _register(plugins, item, partial(_import_configured, item), _configured_failure)
    plugins.problems.extend(_unknown_hooks(manager))
    return plugins


def _entry_points(
    allowed: set[str] | None, plugins: PluginSet
) -> Iterator[tuple[str, importlib.metadata.EntryPoint]]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        # An editable install can list one twice; the first is the one Python would import.
        found.setdefault(entry_point.name, entry_point)
    if allowed is not None:
        for missing in sorted(allowed - found.keys()):
            installed = ", ".join(sorted(found)) or "none"
            plugins.problems.append(
                PluginProblem(
                    missing,
                    "plugin-import",
                    f"{LOAD_PLUGINS_ENV} names {missing!r}, but no installed distribution "
                    f"offers a {ENTRY_POINT_GROUP!r} entry point of that name (installed: "
                    f"{installed}); fix the name or install the plugin's package",
                )
            )
    for name in sorted(found):
        if allowed is None or name in allowed:
            yield name, found[name]


def _entry_point_failure(entry_point: importlib.metadata.EntryPoint, error: Exception) -> str:
    dist = entry_point.dist
    origin = f" of {dist.name} {dist.version}" if dist is not None else ""
    return (
        f"entry point {entry_point.value!r}{origin} failed to import: "
        f"{type(error).__name__}: {_shown(error)}; fix or reinstall the package, or leave it "
        f"out with {LOAD_PLUGINS_ENV} (a comma-separated list of the entry points to load)"
    )


def _import_configured(item: str) -> object:
    if item.endswith(".py") or "/" in item or os.sep in item:
        return _import_file(Path(item))
    return importlib.import_module(item)


def _configured_failure(error: Exception) -> str:
    if isinstance(error, _PluginFileMissing):
        return str(error)
    return (
        f"failed to import: {type(error).__name__}: {_shown(error)}; fix the plugin, or its "
        "entry in plugins / JOBHOST_PLUGINS"
    )


def _register(
    plugins: PluginSet,
    name: str,
    load: Callable[[], object],
    describe_failure: Callable[[Exception], str],
) -> None:
    try:
        plugin = load()
    except Exception as error:  # importing runs the plugin's own code; any failure is its own
        plugins.problems.append(PluginProblem(name, "plugin-import", describe_failure(error)))
        return
    except (SystemExit, KeyboardInterrupt) as error:
        # Left alone it would end every command with the plugin's exit status and no word.
        what = "raised KeyboardInterrupt"
        if isinstance(error, SystemExit):
            what = f"called sys.exit({error.code!r})"
        plugins.problems.append(
            PluginProblem(
                name,
                "plugin-import",
                f"{what} while being imported; a plugin must not end the process: remove the "
                "call, or leave the plugin out (plugins / JOBHOST_PLUGINS, or "
                f"{LOAD_PLUGINS_ENV} for an installed one)",
            )
        )
        return
    manager = plugins.manager
    if manager.is_registered(plugin):
        # The same module named twice (an entry point and the setting): its jobs count once.
        return
    registered_name = name
    suffix = 2
    while manager.has_plugin(registered_name):
        registered_name = f"{name}#{suffix}"
        suffix += 1
    try:
        manager.register(plugin, name=registered_name)
    except pluggy.PluginValidationError as error:
        plugins.problems.append(
            PluginProblem(
                registered_name,
                "plugin-hook",
                f"a hook implementation does not match its specification: {error}; "
                "take only the arguments the hook documents (see jobhost_contracts.hooks)",
            )
        )
        return
    plugins.names.append(registered_name)
    if not manager.get_hookcallers(plugin):
        plugins.problems.append(_no_hooks(registered_name, plugin))


class _PluginFileMissing(Exception):
    pass


def _import_file(path: Path) -> ModuleType:
    resolved = path.expanduser().resolve()
    if not resolved.is_file():
        raise _PluginFileMissing(
            f"plugin file {resolved} does not exist; fix the path in plugins / JOBHOST_PLUGINS "
            "(a relative path counts from the working directory)"
        )
    # A name of its own per file: two plugin.py files must not replace each other.
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in resolved.stem)
    module_name = f"_jobhost_plugin_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise _PluginFileMissing(f"plugin file {resolved} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as an import does: dataclasses look the module up by name.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _no_hooks(name: str, plugin: object) -> PluginProblem:
    # Most likely its functions lack the marker: pluggy ignores them without a word.
    unmarked = sorted(
        attribute
        for attribute in dir(plugin)
        if attribute.startswith(f"{PROJECT_NAME}_") and callable(getattr(plugin, attribute, None))
    )
    if unmarked:
        found = f"its {', '.join(unmarked)} {'is' if len(unmarked) == 1 else 'are'} not marked"
    else:
        found = "it has no function marked as one"
    return PluginProblem(
        name,
        "plugin-no-hooks",
        f"implements no jobhost hook: {found}; is @hookimpl missing? Decorate each hook with "
        "@hookimpl (from jobhost_contracts import hookimpl), or remove the plugin from "
        f"plugins / JOBHOST_PLUGINS (or {LOAD_PLUGINS_ENV} for an installed one)",
    )


def _unknown_hooks(manager: pluggy.PluginManager) -> list[PluginProblem]:
    # pm.check_pending() stops at the first unknown hook; the same walk here lists all of them.
    callers = {
        name: getattr(manager.hook, name) for name in vars(manager.hook) if not name.startswith("_")
    }
    known = ", ".join(sorted(name for name, caller in callers.items() if caller.has_spec()))
    return [
        PluginProblem(
            impl.plugin_name,
            "plugin-unknown-hook",
            f"implements {hook_name!r}, which is not a jobhost hook (known: {known}); fix the "
            "name, or mark it @hookimpl(optionalhook=True) if it is meant for a newer host",
        )
        for hook_name, caller in sorted(callers.items())
        if not caller.has_spec()
        for impl in caller.get_hookimpls()
        if not impl.optionalhook
    ]


def _shown(error: BaseException) -> str:
    # A plugin's error is its own text: redacted, and cut so one plugin cannot flood the output.
    return bound_text(redact_text(str(error)), 500)


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
    wanted = (
        "an iterable of (declaration, executor) pairs; return a list of JobRegistration, or [] "
        "when there is nothing to run"
    )
    for plugin, position, item in _items(plugins, modules, "jobhost_jobs", wanted, problems):
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


def collect_kinds(
    plugins: PluginSet, modules: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, JobKind], list[PluginProblem]]:
    problems: list[PluginProblem] = []
    kinds: dict[str, JobKind] = {}
    offered_by: dict[str, str] = {}
    wanted = "a list of JobKind; return [] when the module offers none"
    for plugin, position, item in _items(plugins, modules, "jobhost_job_kinds", wanted, problems):
        if not isinstance(item, JobKind):
            problem = (
                f"jobhost_job_kinds item {position} is {type(item).__name__}, not a JobKind; "
                "return jobhost_contracts.JobKind objects"
            )
            problems.append(_bad_result(plugin, problem))
        elif item.name in offered_by:
            problem = (
                f"job kind {item.name!r} is offered by plugin {offered_by[item.name]} already; "
                "rename one of them"
            )
            problems.append(_bad_result(plugin, problem))
        else:
            kinds[item.name] = item
            offered_by[item.name] = plugin
    return kinds, problems


def _items(
    plugins: PluginSet,
    modules: Mapping[str, Mapping[str, Any]],
    hook: str,
    wanted: str,
    problems: list[PluginProblem],
) -> Iterator[tuple[str, int, object]]:
    """(plugin, position, item) for every item ``hook`` returned, each implementation called
    in load order with the arguments it asks for; each failure goes to ``problems``."""
    kwargs = {"settings": frozen(modules)}
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
        what = f"raised {type(error).__name__}: {_shown(error)}"
    return PluginProblem(
        plugin,
        "plugin-hook",
        f"{hook_name} {what}; fix the plugin (the hook must not fail: declare a job disabled "
        "when its configuration is missing)",
    )


def _describe(value: object) -> str:
    return "None" if value is None else f"{type(value).__name__} {short_repr(value)}"
