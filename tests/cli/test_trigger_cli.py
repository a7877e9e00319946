"""``jobhost trigger``: a manual run, in this process or on a live host, and its refusals."""

from __future__ import annotations

import getpass
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from jobhost.store.actions import pause_job
from tests.cli.operator_support import Operator, now
from tests.process.conftest import HostProcess
from tests.waiting import wait_for

RESULT_KEYS = {
    "request_id",
    "run_id",
    "job",
    "outcome",
    "host",
    "started_at",
    "finished_at",
    "duration_ms",
    "error",
}

JOBS = [
    {"name": "sample.works", "cron": "0 3 * * *"},
    {"name": "sample.breaks", "cron": "0 3 * * *", "behaviour": "fail"},
    {"name": "sample.off", "cron": "0 3 * * *", "enabled": False},
    {"name": "sample.held", "cron": "0 3 * * *"},
]


def test_with_no_live_host_the_job_runs_in_this_process(operator: Operator) -> None:
    operator.configure(JOBS)
    done, result = operator.json("trigger", "sample.works", "--reason", "rerun after fix")
    assert done.returncode == 0, done.stderr
    assert "no live host: running sample.works in this process" in done.stderr
    assert set(result) == RESULT_KEYS
    assert (result["job"], result["outcome"], result["error"]) == (
        "sample.works",
        "succeeded",
        None,
    )
    (run,) = operator.runs("sample.works")
    assert (run.id, run.source, run.outcome, run.occurrence) == (
        result["run_id"],
        "manual",
        "succeeded",
        None,
    )
    assert run.host_id == result["host"] and result["host"].startswith("cli-")
    assert (run.requested_by, run.reason) == (getpass.getuser(), "rerun after fix")
    assert run.trace_id is not None
    assert result["duration_ms"] == run.duration_ms
    (request,) = operator.requests()
    assert (request.id, request.request_status) == (result["request_id"], "started")
    assert request.id == run.id  # the request is its run
    assert operator.run_log.read_text().split()[:5] == ["sample.works", run.id, "-", "1", "manual"]

    failed = operator.jobhost("trigger", "sample.breaks")
    assert failed.returncode == 1
    assert failed.stdout.startswith("failed: sample.breaks run ")
    assert "business failure on attempt 1" in failed.stdout


def test_an_unknown_job_exits_2_with_the_closest_names(sqlite_operator: Operator) -> None:
    sqlite_operator.configure(JOBS)
    unknown = sqlite_operator.jobhost("trigger", "sample.work")
    assert unknown.returncode == 2
    assert "unknown job 'sample.work'; did you mean sample.works" in unknown.stderr
    assert sqlite_operator.requests() == []


def test_disabled_and_paused_jobs_run(operator: Operator) -> None:
    operator.configure(JOBS)
    disabled = operator.jobhost("trigger", "sample.off")
    assert disabled.returncode == 0, disabled.stderr
    assert "job sample.off is disabled" in disabled.stderr
    assert [r.outcome for r in operator.runs("sample.off")] == ["succeeded"]

    with operator.engine.begin() as connection:
        pause_job(connection, "sample.works", "bob", "noisy", now())
    paused = operator.jobhost("trigger", "sample.works")
    assert paused.returncode == 0, paused.stderr
    assert "warning: job sample.works is paused (by bob" in paused.stderr
    assert [r.outcome for r in operator.runs("sample.works")] == ["succeeded"]


def test_a_run_that_would_overlap_a_running_one_is_refused(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    started = now() - timedelta(minutes=3)
    operator.add_run(
        "sample.held",
        "running",
        started=started,
        occurrence=started,
        host="busy-host",
        lease_expires_at=now() + timedelta(minutes=1),
    )
    done, result = operator.json("trigger", "sample.held")
    assert done.returncode == 1
    assert result["outcome"] == "refused"
    assert result["host"] == "busy-host"
    assert "still running on host busy-host since" in result["error"]
    assert started.strftime("%Y-%m-%d %H:%M:%S") in result["error"]
    assert operator.requests() == []
    assert [r.outcome for r in operator.runs("sample.held")] == ["running"]


def test_no_wait_queues_and_timeout_exits_4(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    operator.add_host("idle-host")  # alive, but no process behind it takes requests
    done, result = operator.json("trigger", "sample.works", "--no-wait")
    assert done.returncode == 0, done.stderr
    assert (result["outcome"], result["run_id"]) == ("queued", None)
    assert [r.request_status for r in operator.requests()] == ["pending"]

    waited, result = operator.json("trigger", "sample.works", "--timeout", "0.5")
    assert waited.returncode == 4, waited.stderr
    assert result["outcome"] == "queued"
    assert "timed out waiting" in result["error"]
    # Both wait, pending, for a host: neither has started.
    assert [r.outcome for r in operator.runs("sample.works")] == ["pending", "pending"]
    assert all(r.started_at is None for r in operator.runs("sample.works"))


# The host's heartbeat also reads SQLite's signal counter, a net for a lost ring: far slower
# than the wait allowed here, so only the ring itself can wake the host in time.
SLOW_HEARTBEAT = "20s"
TRIGGERS = 5
PICKED_UP_WITHIN = {"sqlite": timedelta(seconds=1), "postgres": timedelta(seconds=0.2)}


@pytest.mark.slow
def test_a_live_host_picks_every_request_up_at_once(operator: Operator) -> None:
    operator.configure(JOBS, heartbeat_interval=SLOW_HEARTBEAT)
    host = HostProcess(
        "live-1",
        operator.config,
        operator.directory / "live-1.log",
        operator.env(JOBHOST_HOST_ID="live-1"),
    )
    within = PICKED_UP_WITHIN["sqlite" if operator.url.startswith("sqlite") else "postgres"]
    try:
        wait_for(lambda: operator.live_hosts() == ["live-1"], 30, "the host to start")
        for number in range(1, TRIGGERS + 1):
            began = time.monotonic()
            done, result = operator.json("trigger", "sample.works", "--reason", "by hand")
            assert done.returncode == 0, done.stderr + host.log()
            assert "no live host" not in done.stderr
            assert (result["outcome"], result["host"]) == ("succeeded", "live-1")
            run = operator.runs("sample.works")[-1]
            assert (run.id, run.host_id, run.source) == (result["run_id"], "live-1", "manual")
            assert run.started_at is not None
            waited = run.started_at - run.queued_at
            assert waited < within, f"trigger {number} of {TRIGGERS} started after {waited}"
            time.sleep(max(0.0, began + 1 - time.monotonic()))
        # Each request is its run, started by the live host.
        assert [r.host_id for r in operator.requests()] == ["live-1"] * TRIGGERS
    finally:
        host.stop()


def test_a_run_here_is_cancelled_by_the_timeout_or_ctrl_c(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure(
        [{"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 60}]
    )
    done, result = operator.json("trigger", "sample.slow", "--timeout", "0.5")
    assert done.returncode == 4, done.stderr
    assert result["outcome"] == "cancelled"
    assert "timed out waiting: cancelling the run" in done.stderr
    assert [r.outcome for r in operator.runs("sample.slow")] == ["cancelled"]

    command = [sys.executable, "-m", "jobhost", "--config", str(operator.config)]
    child = subprocess.Popen(
        [*command, "trigger", "sample.slow"],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: [r for r in operator.runs("sample.slow") if r.outcome == "running"],
            30,
            "the run to start",
        )
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
        child.communicate()  # closes the pipes: a failure here is not a warning in the next test
    assert child.returncode == 1, stderr
    assert "interrupted: cancelling the run" in stderr
    assert stdout.startswith("cancelled: sample.slow")
    assert [r.outcome for r in operator.runs("sample.slow")] == ["cancelled", "cancelled"]
