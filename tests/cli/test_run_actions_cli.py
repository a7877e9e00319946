"""``jobhost retry RUN_ID`` and ``jobhost cancel RUN_ID``: one run, acted on through the claim
path and the run's host, refused clearly, logged in the change log; real processes, both
stores."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from datetime import timedelta

import pytest

from tests.cli.operator_support import Operator, now
from tests.process.conftest import HostProcess
from tests.waiting import wait_for

JOBS = [
    {"name": "sample.flaky", "cron": "0 3 * * *", "behaviour": "fail-once"},
    {"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 120},
]
_COMMAND = (sys.executable, "-m", "jobhost", "--config")
OCCURRENCE = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)


def _changes(operator: Operator) -> list[dict[str, object]]:
    done = operator.jobhost("changes", "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["changes"])


def test_retry_runs_the_failed_occurrence_again_at_the_next_attempt(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    failed = operator.add_run(
        "sample.flaky", "failed", occurrence=OCCURRENCE, error="first attempt fails"
    )
    done, result = operator.json("retry", failed, "--reason", "upstream fixed")
    assert done.returncode == 0, done.stderr
    assert "no live host: running sample.flaky in this process" in done.stderr
    assert (result["retry_of"], result["attempt"], result["outcome"]) == (failed, 2, "succeeded")
    first, second = operator.runs("sample.flaky")
    assert second.id == result["run_id"] and first.id == failed
    assert (second.occurrence, second.attempt, second.source) == (OCCURRENCE, 2, "retry")
    assert second.idempotency_key == f"sample.flaky:{OCCURRENCE:%Y-%m-%dT%H:%M:%SZ}"
    assert (second.requested_by, second.reason) == (getpass.getuser(), "upstream fixed")
    assert second.host_id is not None and second.host_id.startswith("cli-")
    (change,) = _changes(operator)
    assert (change["action"], change["actor"], change["reason"]) == (
        "retry",
        getpass.getuser(),
        "upstream fixed",
    )
    assert change["before"] == {"run_id": failed, "attempt": 1, "outcome": "failed"}
    assert change["after"] == {"run_id": second.id, "attempt": 2}
    # Its work succeeded now: a second retry of the first attempt is refused.
    again = operator.jobhost("retry", failed, "--reason", "once more")
    assert again.returncode == 3, again.stderr
    assert f"(run {second.id}) succeeded: there is nothing to retry" in again.stderr


def test_retry_refuses_unknown_running_and_succeeded_runs(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    unknown = operator.jobhost("retry", "nope", "--reason", "x")
    assert unknown.returncode == 3
    assert "no run 'nope'" in unknown.stderr and "jobhost history" in unknown.stderr
    running = operator.add_run(
        "sample.slow", "running", lease_expires_at=now() + timedelta(hours=1)
    )
    busy = operator.jobhost("retry", running, "--reason", "x")
    assert busy.returncode == 3
    assert f"run {running} of sample.slow is still running" in busy.stderr
    assert f"jobhost cancel {running}" in busy.stderr
    fine = operator.add_run("sample.flaky", "succeeded", occurrence=OCCURRENCE)
    done = operator.jobhost("retry", fine, "--reason", "x")
    assert done.returncode == 3 and "succeeded: there is nothing to retry" in done.stderr
    blank = operator.jobhost("retry", fine, "--reason", "  ")
    assert blank.returncode == 2 and "must say why" in blank.stderr
    assert _changes(operator) == []


def test_retry_no_wait_queues_once_and_cancel_records_the_queued_retry(
    operator: Operator,
) -> None:
    operator.configure(JOBS)
    operator.sync()
    failed = operator.add_run("sample.flaky", "timed_out", occurrence=OCCURRENCE)
    done, result = operator.json("retry", failed, "--no-wait", "--reason", "later")
    assert done.returncode == 0, done.stderr
    assert (result["outcome"], result["attempt"]) == ("queued", 2)
    twice = operator.jobhost("retry", failed, "--reason", "again")
    assert twice.returncode == 3
    assert f"(run {result['run_id']}) is pending: a retry now would run it twice" in twice.stderr
    # A run not yet started is recorded cancelled at once, with who and why.
    done, shown = operator.json("cancel", result["run_id"], "--reason", "not tonight")
    assert done.returncode == 0, done.stderr
    assert (shown["requested"], shown["outcome"]) == ("cancelled", "cancelled")
    queued = next(r for r in operator.runs("sample.flaky") if r.id == result["run_id"])
    assert (queued.outcome, queued.cancel_requested_by, queued.cancel_reason) == (
        "cancelled",
        getpass.getuser(),
        "not tonight",
    )
    assert [c["action"] for c in _changes(operator)] == ["retry", "cancel"]


def test_cancel_refuses_unknown_finished_and_orphaned_runs(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    unknown = operator.jobhost("cancel", "nope", "--reason", "x")
    assert unknown.returncode == 3 and "no run 'nope'" in unknown.stderr
    ended = operator.add_run("sample.flaky", "failed", occurrence=OCCURRENCE)
    done = operator.jobhost("cancel", ended, "--reason", "x")
    assert done.returncode == 3 and "already ended failed" in done.stderr
    dead = operator.add_run(
        "sample.slow", "running", host="gone-1", lease_expires_at=now() - timedelta(minutes=5)
    )
    done = operator.jobhost("cancel", dead, "--reason", "x")
    assert done.returncode == 3
    assert "belongs to host gone-1, which is not alive" in done.stderr
    assert "jobhost run" in done.stderr and f"jobhost retry {dead}" in done.stderr
    assert _changes(operator) == []


def test_a_cancel_waiting_on_a_host_that_died_is_refused_once_its_lease_expires(
    operator: Operator,
) -> None:
    operator.configure(JOBS)
    operator.sync()
    # Its host was killed a moment ago and no other host runs: nothing will ever end the run.
    dying = operator.add_run(
        "sample.slow", "running", host="gone-1", lease_expires_at=now() + timedelta(seconds=2)
    )
    done = operator.jobhost("cancel", dying, "--reason", "x", timeout=30)
    assert done.returncode == 3, done.stderr
    assert f"asked host gone-1 to cancel run {dying}" in done.stderr
    assert "belongs to host gone-1, which is not alive" in done.stderr


@pytest.mark.slow
def test_cancel_stops_a_run_on_a_live_host_and_in_a_trigger_process(operator: Operator) -> None:
    operator.configure(JOBS, heartbeat_interval="1s")
    host = HostProcess(
        "live-1",
        operator.config,
        operator.directory / "live-1.log",
        operator.env(JOBHOST_HOST_ID="live-1"),
    )
    try:
        wait_for(lambda: operator.live_hosts() == ["live-1"], 30, "the host to start")
        queued = operator.jobhost("trigger", "sample.slow", "--no-wait", "--reason", "go")
        assert queued.returncode == 0, queued.stderr
        (run,) = wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the run to start on the host",
        )
        done, shown = operator.json("cancel", run.id, "--reason", "stuck on vendor")
        assert done.returncode == 0, done.stderr + host.log()
        assert f"asked host live-1 to cancel run {run.id}" in done.stderr
        assert (shown["outcome"], shown["cancelled_by"]) == ("cancelled", getpass.getuser())
        (ended,) = operator.runs("sample.slow")
        assert (ended.outcome, ended.host_id) == ("cancelled", "live-1")
        assert (ended.cancel_requested_by, ended.cancel_reason) == (
            getpass.getuser(),
            "stuck on vendor",
        )
    finally:
        host.stop()
    # No host now: a trigger runs the job in its own process, and a cancel reaches it there.
    child = subprocess.Popen(
        [*_COMMAND, str(operator.config), "trigger", "sample.slow", "--reason", "by hand"],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        (run,) = wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the run to start in the trigger process",
        )
        done = operator.jobhost("cancel", run.id, "--reason", "wrong day")
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert done.returncode == 0, done.stderr
    assert child.returncode == 1, stderr
    assert "cancel asked by" in stderr and stdout.startswith("cancelled: sample.slow")
    assert [c["action"] for c in _changes(operator)] == ["trigger", "cancel", "trigger", "cancel"]


def test_cancel_stops_a_backfill_run_in_the_backfill_process(operator: Operator) -> None:
    operator.configure(JOBS, heartbeat_interval="1s")
    operator.sync()
    # No host: the backfill command runs the occurrence itself, and a cancel reaches it there.
    start = (OCCURRENCE - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = (OCCURRENCE + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    child = subprocess.Popen(
        [
            *_COMMAND,
            str(operator.config),
            "backfill",
            "sample.slow",
            "--from",
            start,
            "--to",
            end,
            "--mode",
            "all",
            "--reason",
            "replay",
        ],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        (run,) = wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the backfill's run to start in the backfill process",
        )
        assert run.backfill_id is not None
        done = operator.jobhost("cancel", run.id, "--reason", "wrong range", timeout=20)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert done.returncode == 0, done.stderr
    assert f"cancel asked by {getpass.getuser()}" in stderr, stderr
    (ended,) = operator.runs("sample.slow")
    assert (ended.outcome, ended.cancel_reason) == ("cancelled", "wrong range")
    assert child.returncode == 1, stdout + stderr
