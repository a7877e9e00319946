"""``jobhost next``: previews of an expression or of a job's effective trigger, in UTC and local.

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

import jobhost.cli.report  # registers the command on the group
from jobhost.cli import cli

BERLIN = ["--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-03-28T12:00:00Z"]

_PLUGIN = """\
from datetime import timedelta

from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


def job(name, **fields):
    declaration = BackgroundJobDeclaration(name=name, module="files", **fields)
    return JobRegistration(declaration, Executor())


@hookimpl
def jobhost_jobs(settings):
    return [
        job("files.orphan-cleanup", cron="0 3 * * *"),
        job("files.purge", interval=timedelta(hours=6)),
        job("files.manual", enabled=False),
        job("files.broken", cron="0 61 * * *"),
    ]
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "plugin.py"
    path.write_text(_PLUGIN)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    # The bundled modules are left out: they are not what these tests are about.
    return {**clean, "JOBHOST_PLUGINS": str(path), "JOBHOST_LOAD_PLUGINS": ""}


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> CliRunner:
    for key in list(os.environ):
        if key.startswith("JOBHOST_"):
            monkeypatch.delenv(key)
    return CliRunner(env={k: v for k, v in env.items() if k.startswith("JOBHOST_")})


def jobhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_berlin_spring_forward_as_json(env: dict[str, str]) -> None:
    done = jobhost(env, "next", *BERLIN, "-n", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"utc": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00"},
        {"utc": "2026-03-30T00:30:00Z", "local": "2026-03-30T02:30:00+02:00"},
    ]


def test_plain_output_is_two_aligned_columns(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", *BERLIN, "-n", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "UTC" + " " * 20 + "local (Europe/Berlin)",
        "2026-03-29T01:00:00Z   2026-03-29T03:00:00+02:00 CEST",
        "2026-03-30T00:30:00Z   2026-03-30T02:30:00+02:00 CEST",
    ]


def test_instants_are_strictly_after_and_a_naive_after_means_utc(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["next", "--cron", "0 3 * * *", "--after", "2026-01-01T03:00:00", "-n", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["utc"] == "2026-01-02T03:00:00Z"


def test_after_with_an_offset(runner: CliRunner) -> None:
    result = runner.invoke(
        cli,
        [
            "next",
            "--cron",
            "0 3 * * *",
            "--after",
            "2026-01-01T05:00:00+03:00",
            "--json",
            "-n",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"utc": "2026-01-01T03:00:00Z", "local": "2026-01-01T03:00:00+00:00"}
    ]


def test_default_count_and_default_after_is_now(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", "--cron", "* * * * *", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 5


def test_a_bad_field_exits_2_naming_it(env: dict[str, str]) -> None:
    done = jobhost(env, "next", "--cron", "61 3 * * *")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "'--cron'" in done.stderr
    assert "minute field '61': 61 is out of range 0-59" in done.stderr


def test_an_unknown_zone_exits_2(env: dict[str, str]) -> None:
    done = jobhost(env, "next", "--cron", "0 3 * * *", "--tz", "Europe/Berln")
    assert done.returncode == 2
    assert "Europe/Berln" in done.stderr


def test_an_expression_that_never_fires_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", "--cron", "0 0 30 2 *"])
    assert result.exit_code == 2
    assert "'0 0 30 2 *'" in result.output


def test_a_bad_after_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", "--cron", "0 3 * * *", "--after", "yesterday"])
    assert result.exit_code == 2
    assert "ISO-8601" in result.output


@pytest.mark.parametrize("after", ["0001-01-01T00:00:00+05:00", "9999-12-31T22:00:00Z"])
def test_an_after_outside_the_computed_years_exits_2(runner: CliRunner, after: str) -> None:
    result = runner.invoke(cli, ["next", "--cron", "* * * * *", "--after", after])
    assert result.exit_code == 2, result.output
    assert "outside the instants jobhost computes (from year 2 to year 9998)" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["next"],
        ["next", "files.purge", "--cron", "0 3 * * *"],
        ["next", "files.purge", "--tz", "Europe/Berlin"],
        ["next", "--cron", "0 3 * * *", "-n", "0"],
    ],
)
def test_usage_errors_exit_2(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 2, result.output


def test_a_job_by_name_uses_its_override(tmp_path: Path, env: dict[str, str]) -> None:
    config = tmp_path / "jobhost.toml"
    config.write_text(
        '[jobs."files.orphan-cleanup"]\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"\n'
    )
    env = {**env, "JOBHOST_CONFIG": str(config)}
    done = jobhost(
        env, "next", "files.orphan-cleanup", "--after", "2026-03-28T12:00:00Z", "-n", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0] == {
        "utc": "2026-03-29T01:00:00Z",
        "local": "2026-03-29T03:00:00+02:00",
    }
    assert "override" in done.stderr


def test_a_job_by_name_without_override(runner: CliRunner) -> None:
    result = runner.invoke(
        cli,
        ["next", "files.orphan-cleanup", "--after", "2026-03-28T12:00:00Z", "-n", "1", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"utc": "2026-03-29T03:00:00Z", "local": "2026-03-29T03:00:00+00:00"}
    ]


def test_an_interval_job_counts_from_after(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["next", "files.purge", "--after", "2026-01-01T00:00:00Z", "-n", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [item["utc"] for item in json.loads(result.stdout)] == [
        "2026-01-01T06:00:00Z",
        "2026-01-01T12:00:00Z",
    ]
    assert "counted from 2026-01-01T00:00:00Z" in result.stderr


def test_an_unknown_name_exits_2_with_suggestions(env: dict[str, str]) -> None:
    done = jobhost(env, "next", "files.orphan-clean")
    assert done.returncode == 2
    assert "unknown job 'files.orphan-clean'" in done.stderr
    assert "files.orphan-cleanup" in done.stderr


def test_a_job_without_a_trigger_exits_1(env: dict[str, str]) -> None:
    done = jobhost(env, "next", "files.manual")
    assert done.returncode == 1
    assert "no trigger" in done.stderr
    assert done.stdout == ""


def test_a_job_with_a_broken_trigger_exits_3_listing_its_problems(env: dict[str, str]) -> None:
    done = jobhost(env, "next", "files.broken")
    assert done.returncode == 3
    assert "files.broken (module files) [cron-syntax]" in done.stderr
