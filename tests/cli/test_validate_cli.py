"""``jobhost validate``: exit codes, the plain lines and summary, and the exact JSON shape.

Run as a real process (``python -m jobhost``) where the exit-code mapping matters, through
click's CliRunner where only the output does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import jobhost.cli.checks  # registers the command on the group
from jobhost.cli import cli

_PLUGIN = """\
from datetime import timedelta

from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


@hookimpl
def jobhost_jobs(settings):
    return [
{pairs}
    ]
"""


def plugin(tmp_path: Path, *declarations: str) -> Path:
    pairs = "".join(
        f"        JobRegistration(BackgroundJobDeclaration({d}), Executor()),\n"
        for d in declarations
    )
    path = tmp_path / "plugin.py"
    path.write_text(_PLUGIN.format(pairs=pairs))
    return path


def environment(tmp_path: Path, plugin_path: Path, config: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env["JOBHOST_PLUGINS"] = str(plugin_path)
    # The bundled modules are left out: they are not what these tests are about.
    env["JOBHOST_LOAD_PLUGINS"] = ""
    if config is not None:
        path = tmp_path / "jobhost.toml"
        path.write_text(config)
        env["JOBHOST_CONFIG"] = str(path)
    return env


def jobhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for key in list(os.environ):
        if key.startswith("JOBHOST_"):
            monkeypatch.delenv(key)
    return CliRunner()


def test_a_clean_catalog_exits_0(tmp_path: Path) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    done = jobhost(environment(tmp_path, path), "validate")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"plugin {path}: module files\n"
        "  files.purge: enabled, cron '0 3 * * *' (UTC)\n"
        "1 job, 0 problems\n"
    )


def test_problems_exit_3_with_one_line_each_then_the_summary(tmp_path: Path) -> None:
    path = plugin(
        tmp_path,
        'name="files.orphan-cleanup", module="files", cron="0 61 * * *"',
        'name="files.purge", module="files", interval=timedelta(hours=6)',
        'name="files.sweep", module="files", timezone="Europe/Berln", cron="0 3 * * *"',
    )
    config = '[jobs."files.purgee"]\nenabled = false\n'
    done = jobhost(environment(tmp_path, path, config), "validate")
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("files.orphan-cleanup (module files) [cron-syntax]: ")
    assert lines[0].endswith('[jobs."files.orphan-cleanup"]')
    assert lines[1].startswith("files.purgee [unknown-override]: ")
    assert "'files.purge'" in lines[1]
    assert lines[2].startswith("files.sweep (module files) [unknown-timezone]: ")
    # What loaded, after the problems: the jobs that could not be built are not in it.
    assert lines[3:] == [
        f"plugin {path}: module files",
        "  files.purge: enabled, every 6h",
        "1 job, 3 problems",
    ]


def test_json_has_exactly_ok_jobs_problems_and_warnings(tmp_path: Path) -> None:
    path = plugin(
        tmp_path,
        'name="files.purge", module="files", cron="0 3 * * *"',
        'name="files.never", module="files", cron="0 0 30 2 *"',
    )
    done = jobhost(environment(tmp_path, path), "validate", "--json")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert list(report) == ["ok", "jobs", "problems", "warnings", "plugins"]
    assert report["ok"] is False
    assert report["jobs"] == 1
    (problem,) = report["problems"]
    assert list(problem) == ["job", "module", "code", "message"]
    assert problem["job"] == "files.never"
    assert problem["module"] == "files"
    assert problem["code"] == "cron-never-fires"
    assert "'0 0 30 2 *'" in problem["message"]


def test_json_of_a_clean_catalog(tmp_path: Path, runner: CliRunner) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    result = runner.invoke(
        cli,
        ["validate", "--json"],
        env={"JOBHOST_PLUGINS": str(path), "JOBHOST_LOAD_PLUGINS": ""},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "ok": True,
        "jobs": 1,
        "problems": [],
        "warnings": [],
        "plugins": [
            {
                "plugin": str(path),
                "modules": ["files"],
                "jobs": [
                    {
                        "name": "files.purge",
                        "module": "files",
                        "enabled": True,
                        "disabled_because": None,
                        "trigger": "cron '0 3 * * *' (UTC)",
                        "group": None,
                    }
                ],
            }
        ],
    }


def test_plugin_problems_are_listed_by_plugin(tmp_path: Path, runner: CliRunner) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import jobhost_no_such_dependency\n")
    result = runner.invoke(
        cli,
        ["validate"],
        env={"JOBHOST_PLUGINS": str(broken), "JOBHOST_LOAD_PLUGINS": ""},
    )
    assert result.exit_code == 3
    first, summary = result.output.splitlines()
    assert first.startswith(f"plugin {broken} [plugin-import]: ")
    assert "ModuleNotFoundError" in first
    assert summary == "0 jobs, 1 problem"


def test_the_config_option_is_used(tmp_path: Path, runner: CliRunner) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    config = tmp_path / "other.toml"
    config.write_text('[jobs."files.purge"]\ncron = "0 3 31 2 *"\n')
    result = runner.invoke(
        cli,
        ["--config", str(config), "validate"],
        env={"JOBHOST_PLUGINS": str(path), "JOBHOST_LOAD_PLUGINS": ""},
    )
    assert result.exit_code == 3
    assert "[cron-never-fires]" in result.output
    assert '[jobs."files.purge"]' in result.output


def test_an_invalid_configuration_exits_3(tmp_path: Path) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    env = environment(tmp_path, path, '[jobs."files.purge"]\ncolour = "blue"\n')
    done = jobhost(env, "validate")
    assert done.returncode == 3
    assert "invalid configuration" in done.stderr
    assert done.stdout == ""


_UNCONFIGURED = """\
from datetime import timedelta

from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


def remind(context):
    return Success(None)


@hookimpl
def jobhost_jobs(settings):
    declaration = BackgroundJobDeclaration(
        name="shop.remind",
        module="shop",
        interval=timedelta(hours=1),
        enabled="shop" in settings,
        concurrency_group="shop-db",
    )
    return [JobRegistration(declaration, remind)]
"""


def test_an_unconfigured_module_is_said_to_be_off_and_never_stops_the_host(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shop.py"
    path.write_text(_UNCONFIGURED)

    done = jobhost(environment(tmp_path, path), "validate")

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("warning: shop.remind (module shop) [unknown-concurrency-group]")
    assert lines[0].endswith(
        "(the job is disabled: the host starts, and a run by hand is not limited)"
    )
    assert lines[1:] == [
        f"plugin {path}: module shop",
        "  shop.remind: disabled ([modules.shop] is not configured), every 1h, group shop-db",
        "1 job, 0 problems",
    ]
    # Configured, the job is enabled and its group needs a limit again.
    configured = jobhost(environment(tmp_path, path, "[modules.shop]\n"), "validate")
    assert configured.returncode == 3
    assert "shop.remind (module shop) [unknown-concurrency-group]" in configured.stdout


def test_a_hook_without_hookimpl_is_a_problem_naming_the_plugin(tmp_path: Path) -> None:
    path = tmp_path / "shop.py"
    path.write_text(_UNCONFIGURED.replace("@hookimpl\n", ""))

    done = jobhost(environment(tmp_path, path), "validate")

    assert done.returncode == 3
    assert done.stdout.splitlines()[0] == (
        f"plugin {path} [plugin-no-hooks]: implements no jobhost hook: its jobhost_jobs is not "
        "marked; is @hookimpl missing? Decorate each hook with @hookimpl (from "
        "jobhost_contracts import hookimpl), or remove the plugin from plugins / "
        "JOBHOST_PLUGINS (or JOBHOST_LOAD_PLUGINS for an installed one)"
    )


def test_an_unknown_variable_and_host_key_are_named_with_what_was_meant(tmp_path: Path) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    env = environment(tmp_path, path)
    env["JOBHOST_POLL_INTERVALL"] = "5s"

    done = jobhost(env, "validate")
    typo = jobhost(environment(tmp_path, path, 'poll_intervall = "5s"\n'), "validate")

    assert done.returncode == 0
    assert (
        "warning: environment variable JOBHOST_POLL_INTERVALL is not a jobhost setting and is "
        "ignored; did you mean JOBHOST_POLL_INTERVAL?"
    ) in done.stderr
    assert typo.returncode == 3
    assert "poll_intervall (in jobhost.toml): is not a known setting (did you mean " in typo.stderr
    assert "'poll_interval'?)" in typo.stderr


def test_a_postgres_url_is_accepted_as_postgresql(tmp_path: Path) -> None:
    path = plugin(tmp_path, 'name="files.purge", module="files", cron="0 3 * * *"')
    env = environment(tmp_path, path, 'database_url = "postgres://app@db.internal/app"\n')

    done = jobhost(env, "validate")

    assert done.returncode == 0, done.stderr


def test_a_name_outside_its_module_is_a_warning_with_the_name_to_use(tmp_path: Path) -> None:
    path = plugin(
        tmp_path,
        'name="files.purge", module="files", cron="0 3 * * *"',
        'name="billing.purge", module="files", cron="0 4 * * *"',
    )

    done = jobhost(environment(tmp_path, path), "validate")
    as_json = jobhost(environment(tmp_path, path), "validate", "--json")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        "warning: billing.purge (module files) [name-outside-module]: job name 'billing.purge' "
        "does not start with its module's name (files.): a name is the module, then the job, so "
        "that alerts, configuration and the CLI say whose job it is; rename it files.purge in "
        "the declaration (its history stays under the old name), or declare it in the module "
        "its name starts with"
    )
    assert done.stdout.rstrip().endswith("2 jobs, 0 problems")
    warnings = json.loads(as_json.stdout)["warnings"]
    assert [(w["job"], w["module"], w["code"]) for w in warnings] == [
        ("billing.purge", "files", "name-outside-module")
    ]
