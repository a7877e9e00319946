"""A job name far longer than any job's, typed or pasted by mistake, is refused by its length:
the message stays one short line (the name is never repeated back) and comes at once (no
closest-name search over the catalog), on every command that takes a job name."""

from __future__ import annotations

import pytest

from tests.cli.operator_support import Operator

LONG = "sample." + "x" * 10_000
COMMANDS = {
    "history": ("history", LONG),
    "trigger": ("trigger", LONG, "--no-wait"),
    "pause": ("pause", LONG, "--reason", "typo"),
    "resume": ("resume", LONG, "--reason", "typo"),
    "report": ("report", "--job", LONG),
    "next": ("next", LONG),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_longer_than_any_job_is_described_not_echoed(
    operator: Operator, command: str
) -> None:
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    operator.sync()
    done = operator.jobhost(*COMMANDS[command])
    assert done.returncode == 2, done.stderr[:500]
    assert f"unknown job of {len(LONG)} characters" in done.stderr
    assert "xxxxxxxxxx" not in done.stderr + done.stdout
    assert len(done.stderr) < 500


def test_a_name_of_ordinary_length_is_still_quoted_with_suggestions(operator: Operator) -> None:
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    operator.sync()
    done = operator.jobhost("history", "sample.nightlx")
    assert done.returncode == 2
    assert "unknown job 'sample.nightlx'; did you mean sample.nightly" in done.stderr
