"""A command with no live host runs its work through a host in one-shot mode, in its own process:
only the runs it queued, no scheduled occurrence fired, no host row for other commands to leave
their work to; ``jobhost cancel`` from another terminal reaches its runs within seconds; and a
host that starts meanwhile shares the work through the same claim, running nothing twice."""

from __future__ import annotations

import getpass
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.cli.operator_support import Operator, now
from tests.process.conftest import HostProcess
from tests.waiting import wait_for

_COMMAND = (sys.executable, "-m", "jobhost", "--config")
_SLOW = {"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 120}
_NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *"}
_OCCURRENCE = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)


@pytest.mark.parametrize("command", ["trigger", "retry", "backfill"])
def test_cancel_from_another_terminal_stops_a_run_a_command_drives_within_seconds(
    operator: Operator, command: str
) -> None:
    operator.configure([_SLOW], heartbeat_interval="1s")
    operator.sync()
    args = {
        "trigger": ["trigger", "sample.slow"],
        "retry": ["retry", operator.add_run("sample.slow", "failed", occurrence=_OCCURRENCE)],
        "backfill": ["backfill", "sample.slow", "--from", "2026-11-20", "--to", "2026-11-21"],
    }[command]
    child = _start(operator, *args, "--reason", "by hand")
    try:
        (run,) = wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            f"the run to start in the {command} process",
        )
        asked = time.monotonic()
        done = operator.jobhost("cancel", run.id, "--reason", "wrong day", timeout=20)
        _, stderr = child.communicate(timeout=30)
        took = time.monotonic() - asked
    finally:
        child.kill()
        child.communicate()
    assert done.returncode == 0, done.stderr
    assert took < 10, f"the {command} process took {took:.1f} s to end after the cancel"
    assert child.returncode == 1, stderr
    assert f"cancel asked by {getpass.getuser()}: wrong day" in stderr
    ended = next(r for r in operator.runs("sample.slow") if r.id == run.id)
    assert (ended.outcome, ended.cancel_reason) == ("cancelled", "wrong day")
    assert ended.host_id is not None and ended.host_id.startswith("cli-")


def test_a_command_runs_only_its_own_run_and_is_no_live_host(operator: Operator) -> None:
    quick = {**_SLOW, "seconds": 3}
    operator.configure([quick, _NIGHTLY], heartbeat_interval="1s")
    operator.sync()
    # Overdue: a host would fire it on its first turn.
    overdue = now().replace(microsecond=0) - timedelta(minutes=5)
    operator.set_schedule("sample.nightly", next_occurrence=overdue, due_at=overdue)
    # A request for another job, queued for a host: the trigger's host must leave it too.
    queued = operator.jobhost("trigger", "sample.nightly", "--no-wait", "--reason", "later")
    assert queued.returncode == 0, queued.stderr
    child = _start(operator, "trigger", "sample.slow")
    try:
        wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the run to start in the trigger process",
        )
        # Beating (its run's lease is renewed) but never listed: other commands run their own
        # work rather than wait for it.
        time.sleep(1.5)
        assert operator.live_hosts() == []
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
        child.communicate()
    assert child.returncode == 0, stderr
    assert stdout.startswith("succeeded: sample.slow")
    assert [r.outcome for r in operator.runs("sample.slow")] == ["succeeded"]
    assert [(r.source, r.outcome) for r in operator.runs("sample.nightly")] == [
        ("manual", "pending")
    ]
    schedule = operator.schedule("sample.nightly")
    assert schedule is not None and schedule.next_occurrence == overdue


@pytest.mark.slow
def test_a_host_that_starts_meanwhile_shares_the_backfill_and_runs_nothing_twice(
    operator: Operator,
) -> None:
    # One worker each: the backfill's second slot is left for the host that starts.
    operator.configure([{**_SLOW, "seconds": 2}], heartbeat_interval="1s", worker_pool_size=1)
    nights = [datetime(2026, 11, day, 3, tzinfo=UTC) for day in range(20, 27)]
    child = _start(
        operator,
        "backfill",
        "sample.slow",
        "--from",
        "2026-11-20",
        "--to",
        "2026-11-27",
        "--concurrency",
        "2",
        "--reason",
        "replay",
    )
    host = None
    try:
        wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the backfill to start in the backfill process",
        )
        host = HostProcess(
            "live-1",
            operator.config,
            operator.directory / "live-1.log",
            operator.env(JOBHOST_HOST_ID="live-1"),
        )
        _, stderr = child.communicate(timeout=120)
    finally:
        child.kill()
        child.communicate()
        if host is not None:
            host.stop()
    assert child.returncode == 0, stderr
    ran = operator.runs("sample.slow")
    assert sorted(r.occurrence for r in ran) == nights  # each once
    assert {r.outcome for r in ran} == {"succeeded"}
    assert {r.attempt for r in ran} == {1}
    # Both took part: the command's one-shot host and the host that started (7 runs of 2 s on
    # one worker leave it the time to).
    assert {r.host_id for r in ran} - {"live-1"} and "live-1" in {r.host_id for r in ran}


def _start(operator: Operator, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*_COMMAND, str(operator.config), *args],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
