"""Plugin discovery: every way a plugin can be found, and every way it can fail, by name.

Plugins are real modules written into tmp_path: ``.py`` files, importable packages on a
prepended ``sys.path``, and a distribution's ``.dist-info`` offering a ``jobhost`` entry point.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobhost.config import Settings
from jobhost.plugins import PluginJob, PluginSet, collect_jobs, load_plugins

NO_ENTRY_POINTS = {"JOBHOST_LOAD_PLUGINS": ""}

_GOOD = """\
from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


@hookimpl
def jobhost_jobs(settings):
    return [JobRegistration(BackgroundJobDeclaration(name={name!r}, module="demo"), Executor())]
"""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith("JOBHOST_"):
            monkeypatch.delenv(key)
    modules_before = set(sys.modules)
    yield
    # Importable test plugins get unique names, but leave sys.modules as it was regardless.
    for name in set(sys.modules) - modules_before:
        if name.startswith(("jobhost_test_plugin_", "_jobhost_plugin_")):
            del sys.modules[name]


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def good_plugin(path: Path, job: str) -> Path:
    return write(path, _GOOD.format(name=job))


def unique_module() -> str:
    return f"jobhost_test_plugin_{uuid.uuid4().hex[:10]}"


def load(*plugins: str | Path, environ: dict[str, str] | None = None) -> PluginSet:
    settings = Settings(plugins=[str(p) for p in plugins])
    return load_plugins(settings, environ=NO_ENTRY_POINTS if environ is None else environ)


def jobs_of(
    plugin_set: PluginSet, modules: dict[str, dict[str, object]] | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    collected, problems = collect_jobs(plugin_set, modules or {})
    return (
        [(job.plugin, _name(job)) for job in collected],
        [(p.plugin, p.code, p.message) for p in problems],
    )


def _name(job: PluginJob) -> str:
    return str(getattr(job.declaration, "name", job.declaration))


def test_a_py_file_plugin_is_loaded_under_its_path(tmp_path: Path) -> None:
    path = good_plugin(tmp_path / "plugin.py", "demo.one")
    plugin_set = load(path)
    assert plugin_set.names == [str(path)]
    assert plugin_set.problems == []
    assert jobs_of(plugin_set) == ([(str(path), "demo.one")], [])


def test_two_files_with_the_same_name_do_not_replace_each_other(tmp_path: Path) -> None:
    first = good_plugin(tmp_path / "a" / "plugin.py", "demo.one")
    second = good_plugin(tmp_path / "b" / "plugin.py", "demo.two")
    jobs, problems = jobs_of(load(first, second))
    assert jobs == [(str(first), "demo.one"), (str(second), "demo.two")]
    assert problems == []


def test_a_dotted_import_path_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique_module()
    good_plugin(tmp_path / name / "plugin.py", "demo.dotted")
    write(tmp_path / name / "__init__.py", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin_set = load(f"{name}.plugin")
    assert plugin_set.names == [f"{name}.plugin"]
    assert jobs_of(plugin_set) == ([(f"{name}.plugin", "demo.dotted")], [])


def test_import_failure_is_attributed_and_the_others_still_load(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.py", "raise RuntimeError('cannot reach the database')\n")
    good = good_plugin(tmp_path / "good.py", "demo.one")
    plugin_set = load(broken, "jobhost_no_such_plugin_module", good)
    assert plugin_set.names == [str(good)]
    problems = [(p.plugin, p.code) for p in plugin_set.problems]
    assert problems == [
        (str(broken), "plugin-import"),
        ("jobhost_no_such_plugin_module", "plugin-import"),
    ]
    assert "RuntimeError: cannot reach the database" in plugin_set.problems[0].message
    assert "ModuleNotFoundError" in plugin_set.problems[1].message
    assert "jobhost_no_such_plugin_module" in plugin_set.problems[1].message
    assert jobs_of(plugin_set)[0] == [(str(good), "demo.one")]


def test_a_syntax_error_is_an_import_failure(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.py", "def oops(:\n")
    plugin_set = load(broken)
    assert [(p.plugin, p.code) for p in plugin_set.problems] == [(str(broken), "plugin-import")]
    assert "SyntaxError" in plugin_set.problems[0].message
    assert not any(name.startswith("_jobhost_plugin_broken") for name in sys.modules)


def test_a_missing_plugin_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.py"
    plugin_set = load(missing)
    assert len(plugin_set.problems) == 1
    assert plugin_set.problems[0].code == "plugin-import"
    assert "does not exist" in plugin_set.problems[0].message


def test_a_raising_hook_is_attributed_and_does_not_hide_the_others(tmp_path: Path) -> None:
    raising = write(
        tmp_path / "raising.py",
        "from jobhost_contracts import hookimpl\n\n"
        "@hookimpl\ndef jobhost_jobs(settings):\n    raise KeyError('files')\n",
    )
    good = good_plugin(tmp_path / "good.py", "demo.one")
    jobs, problems = jobs_of(load(raising, good))
    assert jobs == [(str(good), "demo.one")]
    assert [(plugin, code) for plugin, code, _ in problems] == [(str(raising), "plugin-hook")]
    assert "KeyError: 'files'" in problems[0][2]


def test_a_generator_hook_that_raises_midway(tmp_path: Path) -> None:
    path = write(
        tmp_path / "gen.py",
        _GOOD.format(name="demo.one").replace(
            "    return [", "    yield from []\n    raise ValueError('half way')\n    return ["
        ),
    )
    jobs, problems = jobs_of(load(path))
    assert jobs == []
    assert [(code, "ValueError: half way" in msg) for _, code, msg in problems] == [
        ("plugin-hook", True)
    ]


def test_unknown_hooks_name_the_plugin_and_the_hook(tmp_path: Path) -> None:
    path = write(
        tmp_path / "typo.py",
        "from jobhost_contracts import hookimpl\n\n"
        "@hookimpl\ndef jobhost_jbos(settings):\n    return []\n\n"
        "@hookimpl\ndef collect_jobs(settings):\n    return []\n\n"
        "@hookimpl(optionalhook=True)\ndef jobhost_future_hook():\n    return []\n",
    )
    plugin_set = load(path)
    problems = [(p.plugin, p.code) for p in plugin_set.problems]
    assert problems == [(str(path), "plugin-unknown-hook")] * 2
    messages = " ".join(p.message for p in plugin_set.problems)
    assert "'jobhost_jbos'" in messages
    assert "'collect_jobs'" in messages
    assert "jobhost_future_hook" not in messages
    assert "jobhost_jobs" in plugin_set.problems[0].message  # the known hooks are listed


def test_a_hook_with_arguments_the_spec_lacks(tmp_path: Path) -> None:
    path = write(
        tmp_path / "extra.py",
        "from jobhost_contracts import hookimpl\n\n"
        "@hookimpl\ndef jobhost_jobs(settings, database):\n    return []\n",
    )
    plugin_set = load(path)
    assert plugin_set.names == []
    assert [(p.plugin, p.code) for p in plugin_set.problems] == [(str(path), "plugin-hook")]
    assert "database" in plugin_set.problems[0].message


@pytest.mark.parametrize(
    ("result", "shown"),
    [
        ("None", "None"),
        ("'files.purge'", "str"),
        ("{'name': 'x'}", "dict"),
        ("42", "int"),
    ],
)
def test_a_result_that_is_not_an_iterable_of_pairs(tmp_path: Path, result: str, shown: str) -> None:
    path = write(
        tmp_path / "bad.py",
        f"from jobhost_contracts import hookimpl\n\n@hookimpl\ndef jobhost_jobs(settings):\n"
        f"    return {result}\n",
    )
    jobs, problems = jobs_of(load(path))
    assert jobs == []
    assert [(plugin, code) for plugin, code, _ in problems] == [(str(path), "plugin-bad-result")]
    assert shown in problems[0][2]


def test_bad_items_are_reported_and_good_pairs_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mixed.py",
        _GOOD.format(name="demo.one").replace(
            "    return [", "    return ['not a pair', (1, 2, 3), "
        ),
    )
    jobs, problems = jobs_of(load(path))
    assert jobs == [(str(path), "demo.one")]
    assert [code for _, code, _ in problems] == ["plugin-bad-result"] * 2
    assert "item 0" in problems[0][2]
    assert "item 1" in problems[1][2]


def test_an_async_hook_is_a_bad_result_without_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path / "async_hook.py",
        "from jobhost_contracts import hookimpl\n\n"
        "@hookimpl\nasync def jobhost_jobs(settings):\n    return []\n",
    )
    _, problems = jobs_of(load(path))
    assert [code for _, code, _ in problems] == ["plugin-bad-result"]
    assert "coroutine" in problems[0][2]


def test_the_settings_argument_is_a_read_only_view_of_the_modules(tmp_path: Path) -> None:
    path = write(
        tmp_path / "reader.py",
        "from jobhost_contracts import hookimpl\n\nSEEN = []\n\n"
        "@hookimpl\ndef jobhost_jobs(settings):\n"
        "    SEEN.append(settings)\n"
        "    return []\n",
    )
    plugin_set = load(path)
    modules = {"files": {"root": "/srv", "keep": {"days": 7}, "paths": ["/a"]}}
    assert jobs_of(plugin_set, modules) == ([], [])
    (plugin,) = [plugin_set.manager.get_plugin(name) for name in plugin_set.names]
    (seen,) = plugin.SEEN
    assert seen["files"]["root"] == "/srv"
    with pytest.raises(TypeError):
        seen["other"] = {}
    with pytest.raises(TypeError):
        seen["files"]["root"] = "/tmp"
    with pytest.raises(TypeError):
        seen["files"]["keep"]["days"] = 1
    assert seen["files"]["paths"] == ("/a",)
    assert modules["files"]["root"] == "/srv"


def test_a_hook_is_passed_only_the_arguments_its_implementation_takes(tmp_path: Path) -> None:
    source = _GOOD.format(name="demo.no-arguments").replace(
        "jobhost_jobs(settings)", "jobhost_jobs()"
    )
    path = write(tmp_path / "noargs.py", source)
    assert jobs_of(load(path)) == ([(str(path), "demo.no-arguments")], [])


def _distribution(root: Path, entry_points: dict[str, str]) -> None:
    info = root / "jobhost_test_dist-1.0.dist-info"
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    write(info / "METADATA", "Metadata-Version: 2.1\nName: jobhost-test-dist\nVersion: 1.0\n")
    write(info / "entry_points.txt", f"[jobhost]\n{lines}")


def test_entry_point_plugins_load_and_fail_by_their_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, missing = unique_module(), unique_module()
    good_plugin(tmp_path / f"{good}.py", "demo.from-entry-point")
    _distribution(tmp_path, {"zz-good": good, "zz-missing": missing})
    monkeypatch.syspath_prepend(str(tmp_path))
    environ = {"JOBHOST_LOAD_PLUGINS": "zz-good, zz-missing"}
    plugin_set = load(environ=environ)
    assert plugin_set.names == ["zz-good"]
    assert [(p.plugin, p.code) for p in plugin_set.problems] == [("zz-missing", "plugin-import")]
    message = plugin_set.problems[0].message
    assert "ModuleNotFoundError" in message
    assert "jobhost-test-dist 1.0" in message
    assert "JOBHOST_LOAD_PLUGINS" in message
    assert jobs_of(plugin_set)[0] == [("zz-good", "demo.from-entry-point")]


def test_a_module_named_as_entry_point_and_setting_registers_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_module()
    good_plugin(tmp_path / f"{name}.py", "demo.once")
    _distribution(tmp_path, {"zz-once": name})
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin_set = load(name, environ={"JOBHOST_LOAD_PLUGINS": "zz-once"})
    assert plugin_set.names == ["zz-once"]
    assert jobs_of(plugin_set)[0] == [("zz-once", "demo.once")]


def test_the_allow_list_names_an_entry_point_nobody_installed() -> None:
    plugin_set = load(environ={"JOBHOST_LOAD_PLUGINS": "jobhost-nonexistent"})
    assert [(p.plugin, p.code) for p in plugin_set.problems] == [
        ("jobhost-nonexistent", "plugin-import")
    ]
    assert "no installed distribution" in plugin_set.problems[0].message


def test_an_empty_allow_list_loads_no_entry_point() -> None:
    plugin_set = load()
    assert plugin_set.names == []
    assert plugin_set.problems == []


def test_every_installed_entry_point_is_tried_without_an_allow_list() -> None:
    # The bundled modules may still be placeholders: only that each was tried is asserted.
    installed = {ep.name for ep in importlib.metadata.entry_points(group="jobhost")}
    assert {"jobhost", "files", "http"} <= installed
    plugin_set = load(environ={})
    tried = set(plugin_set.names) | {
        p.plugin for p in plugin_set.problems if p.code == "plugin-import"
    }
    assert installed <= tried
    for problem in plugin_set.problems:
        if problem.code == "plugin-import" and problem.plugin in installed:
            assert "entry point" in problem.message
