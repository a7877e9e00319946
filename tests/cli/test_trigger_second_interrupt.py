"""Ctrl-C twice in a command that runs a job in its own process: the first cancels the run
(``trigger``) or stops claiming (``backfill``), the second leaves what is in flight to its lease
and the command exits at once, even while the job's code ignores its cancellation."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.cli.operator_support import Operator

# The job ignores cancellation for 60 s: a command waiting for it would take that long.
_DEAF = {"name": "sample.deaf", "cron": "0 3 * * *", "behaviour": "ignore-cancel", "seconds": 60}
_NIGHTS = ["--from", "2026-11-25", "--to", "2026-11-27", "--reason", "outage"]


def test_a_second_ctrl_c_exits_at_once_leaving_the_run_to_its_lease(operator: Operator) -> None:
    def started() -> None:
        while [run.outcome for run in operator.runs("sample.deaf")] != ["running"]:
            time.sleep(0.05)

    ended = _interrupted_twice(
        operator, ["trigger", "sample.deaf"], "in this process", started, "interrupted: cancel"
    )
    assert "Ctrl-C again to abandon it" in ended.first
    assert ended.code == 1
    assert "jobhost: interrupted" in ended.stderr
    # Left to its lease: still running, held, for a host to record abandoned once it ends.
    [run] = operator.runs("sample.deaf")
    assert run.outcome == "running"
    assert run.lease_expires_at is not None


def test_a_second_ctrl_c_detaches_a_backfill_run_here_at_once(operator: Operator) -> None:
    ended = _interrupted_twice(
        operator,
        ["backfill", "sample.deaf", *_NIGHTS],
        "here (run ",
        lambda: None,
        "interrupted: claiming no more",
    )
    assert "Ctrl-C again to leave them to their lease" in ended.first
    assert ended.code == 0, ended.stderr
    assert "detached: backfill" in ended.stderr
    # The run it started is left to its lease; the occurrence it never reached waits in the
    # store as the backfill's pending run, for any host.
    left = sorted(run.outcome for run in operator.runs("sample.deaf"))
    assert left == ["pending", "running"]


@dataclass
class _Ended:
    first: str
    """The line the first Ctrl-C printed."""
    code: int
    stderr: str
    """What the command printed after the second Ctrl-C."""


def _interrupted_twice(
    operator: Operator, args: list[str], running: str, started: Callable[[], None], first: str
) -> _Ended:
    """Run ``jobhost ARGS`` on the deaf job; once it says ``running`` and ``started`` returns,
    Ctrl-C, wait for the line holding ``first``, Ctrl-C again: the command must end within 10 s
    of it, with no traceback."""
    operator.configure([_DEAF])
    child = subprocess.Popen(
        [sys.executable, "-m", "jobhost", "--config", str(operator.config), *args],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        _wait_for_line(child.stderr, running)
        started()
        child.send_signal(signal.SIGINT)
        said = _wait_for_line(child.stderr, first)
        child.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, rest = child.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        child.kill()
        child.communicate()
    assert took < 10, f"the second Ctrl-C took {took:.1f} s to end the command"
    assert "Traceback" not in rest
    return _Ended(said, child.returncode, rest)


def _wait_for_line(stream: object, text: str) -> str:
    """The first line of ``stream`` (a child's stderr) holding ``text``; the test's timeout
    bounds the wait."""
    for line in stream:  # type: ignore[attr-defined]
        if text in line:
            return str(line)
    raise AssertionError(f"the command ended without saying {text!r}")
