"""A reason with a control character is refused where it is given (exit 2 naming --reason), and
text that reaches the change log another way (a ``$USER`` holding an escape sequence) is shown
escaped by ``jobhost changes``: real processes, both stores."""

from __future__ import annotations

from tests.cli.operator_support import Operator
from tests.commands import jobhost_command

JOBS = [{"name": "sample.nightly", "cron": "0 3 * * *"}]
TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def test_a_reason_with_an_escape_sequence_is_refused(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    for command in (
        ("pause", "sample.nightly"),
        ("trigger", "sample.nightly", "--no-wait"),
        ("state", "sample.nightly", "--set", "k=v"),
    ):
        for reason in (TITLE, LINK, "x" * 501):
            done = operator.jobhost(*command, "--reason", reason)
            assert done.returncode == 2, (command, done.stdout, done.stderr)
            assert "--reason" in done.stderr, done.stderr
    assert operator.jobhost("changes").stdout.strip() == "no change logged"
    # Whitespace, a tab or a line break included, is folded, not refused.
    assert operator.jobhost("pause", "sample.nightly", "--reason", "disk\tfull\n").returncode == 0


def test_changes_show_someone_elses_control_characters_escaped(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    user = f"alice{TITLE}"
    env = operator.env(USER=user, LOGNAME=user)
    args = ["--config", str(operator.config)]
    paused = jobhost_command([*args, "pause", "sample.nightly", "--reason", "vendor"], env=env)
    assert paused.returncode == 0, paused.stderr
    shown = operator.jobhost("changes").stdout
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
    assert "alice\\x1b]0;owned\\x07 (cli)  pause  sample.nightly: vendor" in shown, shown
