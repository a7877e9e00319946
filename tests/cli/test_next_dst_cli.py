"""``jobhost next --dst-gap / --dst-repeat``, and a named job's daylight-saving policy."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import jobhost.cli.report  # registers the command on the group
from jobhost.cli import cli
from tests.cli.test_next_cli import BERLIN, env, jobhost, runner

__all__ = ["env", "runner"]  # fixtures, used by name

AUTUMN_NY = ["--cron", "30 1 * * *", "--tz", "America/New_York", "--after", "2026-10-31T12:00Z"]


def test_skip_leaves_the_gap_day_out_and_lists_it(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", *BERLIN, "-n", "2", "--dst-gap", "skip"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "UTC" + " " * 20 + "local (Europe/Berlin)",
        "2026-03-30T00:30:00Z   2026-03-30T02:30:00+02:00 CEST",
        "2026-03-31T00:30:00Z   2026-03-31T02:30:00+02:00 CEST",
        "does not exist, recorded missed: 2026-03-29T02:30:00 Europe/Berlin "
        "(counted at 2026-03-29T01:30:00Z)",
    ]


def test_every_repeat_choice_on_the_new_york_fall_back(runner: CliRunner) -> None:
    expected = {
        "once": ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        "first": ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        "second": ["2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"],
        "both": ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"],
    }
    for choice, instants in expected.items():
        result = runner.invoke(
            cli, ["next", *AUTUMN_NY, "-n", "2", "--json", "--dst-repeat", choice]
        )
        assert result.exit_code == 0, result.output
        assert [item["utc"] for item in json.loads(result.stdout)] == instants, choice


def test_a_wildcard_expression_says_the_flags_change_nothing(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", "--cron", "*/30 * * * *", "--dst-repeat", "both"])
    assert result.exit_code == 0
    assert "wildcard job follows real time" in result.stderr


def test_a_bad_choice_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["next", *BERLIN, "--dst-gap", "later"])
    assert result.exit_code == 2
    assert "'shift'" in result.output and "'skip'" in result.output


def test_a_named_job_shows_its_policy_and_previews_another(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = tmp_path / "jobhost.toml"
    config.write_text(
        '[jobs."files.orphan-cleanup"]\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"\n'
        'dst_gap = "skip"\n'
    )
    env = {**env, "JOBHOST_CONFIG": str(config)}
    args = ["next", "files.orphan-cleanup", "--after", "2026-03-28T12:00:00Z", "-n", "1"]
    done = jobhost(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"utc": "2026-03-30T00:30:00Z", "local": "2026-03-30T02:30:00+02:00"}
    ]
    assert "daylight saving: dst_gap=skip, dst_repeat=once" in done.stderr
    assert "files.orphan-cleanup: cron '30 2 * * *' in Europe/Berlin, dst_gap=skip" in done.stderr

    preview = jobhost(env, *args, "--json", "--dst-gap", "shift")
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)[0]["utc"] == "2026-03-29T01:00:00Z"
    assert "previewing dst_gap=shift, dst_repeat=once instead" in preview.stderr
