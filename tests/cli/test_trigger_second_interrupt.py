"""Ctrl-C twice in a command that runs a job in its own process: the first cancels the run
(``trigger``) or stops claiming (``backfill``), the second leaves what is in flight to its lease
and the command exits at once, even while the job's code ignores its cancellation."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.cli.operator_support import Operator

_JOBHOST = [sys.executable, "-m", "jobhost"]
_NIGHTS = ["--from", "2026-11-25", "--to", "2026-11-27", "--reason", "outage"]


def test_a_second_ctrl_c_exits_at_once_leaving_the_run_to_its_lease(operator: Operator) -> None:
    # The job ignores cancellation for 60 s: a command waiting for it would take that long.
    deaf = {"name": "sample.deaf", "cron": "0 3 * * *", "behaviour": "ignore-cancel"}
    operator.configure([{**deaf, "seconds": 60}])
    child = subprocess.Popen(
        [*_JOBHOST, "--config", str(operator.config), "trigger", "sample.deaf"],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        _wait_for_line(child.stderr, "in this process")
        while [run.outcome for run in operator.runs("sample.deaf")] != ["running"]:
            assert child.poll() is None, "the command ended before its run started"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        first = _wait_for_line(child.stderr, "interrupted: cancelling the run")
        child.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, rest = child.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        child.kill()
        child.communicate()
    assert "Ctrl-C again to abandon it" in first
    assert took < 10, f"the second Ctrl-C took {took:.1f} s to end the command"
    assert child.returncode == 1
    assert "jobhost: interrupted" in rest
    assert "Traceback" not in rest
    # Left to its lease: still running, held, for a host to record abandoned once it ends.
    [run] = operator.runs("sample.deaf")
    assert run.outcome == "running"
    assert run.lease_expires_at is not None


def test_a_second_ctrl_c_detaches_a_backfill_run_here_at_once(operator: Operator) -> None:
    deaf = {"name": "sample.deaf", "cron": "0 3 * * *", "behaviour": "ignore-cancel"}
    operator.configure([{**deaf, "seconds": 60}])
    child = subprocess.Popen(
        [*_JOBHOST, "--config", str(operator.config), "backfill", "sample.deaf", *_NIGHTS],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        _wait_for_line(child.stderr, "here (run ")
        child.send_signal(signal.SIGINT)
        first = _wait_for_line(child.stderr, "interrupted: claiming no more")
        child.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, rest = child.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        child.kill()
        child.communicate()
    assert "Ctrl-C again to leave them to their lease" in first
    assert took < 10, f"the second Ctrl-C took {took:.1f} s to end the command"
    assert child.returncode == 0, rest
    assert "detached: backfill" in rest
    assert "Traceback" not in rest
    assert [run.outcome for run in operator.runs("sample.deaf")] == ["running"]


def _wait_for_line(stream: object, text: str) -> str:
    """The first line of ``stream`` (a child's stderr) holding ``text``; the test's timeout
    bounds the wait."""
    for line in stream:  # type: ignore[attr-defined]
        if text in line:
            return str(line)
    raise AssertionError(f"the command ended without saying {text!r}")
