"""``jobhost pause`` and ``jobhost resume``: persistent, and seen by every replica at once."""

from __future__ import annotations

import getpass
import time

import pytest

from jobhost.records import RunRecord
from tests.cli.operator_support import Operator
from tests.process.conftest import HostProcess
from tests.waiting import wait_for


def test_pause_and_resume_record_who_when_and_why(operator: Operator) -> None:
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    # No host has run yet: pausing schedules the job first, so the pause has a row to live in.
    assert operator.schedule("sample.nightly") is None
    done = operator.jobhost("pause", "sample.nightly", "--reason", "vendor outage")
    assert done.returncode == 0, done.stderr
    row = operator.schedule("sample.nightly")
    assert row is not None and row.paused and row.next_occurrence is not None
    assert (row.paused_by, row.paused_reason) == (getpass.getuser(), "vendor outage")
    assert row.paused_at is not None
    stamp = row.paused_at.strftime("%Y-%m-%d %H:%M:%S")
    assert done.stdout.strip() == (
        f"sample.nightly paused by {getpass.getuser()} at {stamp}Z: vendor outage"
    )
    again = operator.jobhost("pause", "sample.nightly", "--reason", "other")
    assert again.returncode == 0
    assert "already paused" in again.stdout and "vendor outage" in again.stdout

    unsaid = operator.jobhost("resume", "sample.nightly")
    assert unsaid.returncode == 2 and "Missing option '--reason'" in unsaid.stderr
    resumed = operator.jobhost("resume", "sample.nightly", "--reason", "vendor back")
    assert resumed.returncode == 0, resumed.stderr
    assert "sample.nightly resumed at" in resumed.stdout
    assert f"paused by {getpass.getuser()} at {stamp}Z: vendor outage" in resumed.stdout
    after = operator.schedule("sample.nightly")
    assert after is not None and not after.paused and after.paused_by is None
    assert operator.jobhost("resume", "sample.nightly", "--reason", "x").stdout.strip() == (
        "sample.nightly was not paused"
    )


def test_pause_needs_a_reason_and_a_known_job(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    no_reason = operator.jobhost("pause", "sample.nightly")
    assert no_reason.returncode == 2
    assert "Missing option '--reason'" in no_reason.stderr
    unknown = operator.jobhost("resume", "sample.nighty", "--reason", "typo")
    assert unknown.returncode == 2
    assert "did you mean sample.nightly" in unknown.stderr
    assert operator.schedule("sample.nightly") is None


@pytest.mark.slow
def test_a_pause_stops_every_replica_at_once_and_resume_restarts_them(
    operator: Operator,
) -> None:
    job = "sample.every-second"
    operator.configure([{"name": job, "cron": "* * * * * *"}], heartbeat_interval="1s")
    replicas = [
        HostProcess(
            host_id,
            operator.config,
            operator.directory / f"{host_id}.log",
            operator.env(JOBHOST_HOST_ID=host_id),
        )
        for host_id in ("replica-a", "replica-b")
    ]
    try:
        wait_for(lambda: len(operator.live_hosts()) == 2, 30, "both replicas to start")
        wait_for(lambda: _ran(operator, job), 15, "a first run")
        done = operator.jobhost("pause", job, "--reason", "maintenance")
        assert done.returncode == 0, done.stderr
        row = operator.schedule(job)
        assert row is not None and row.paused_at is not None
        paused_at = row.paused_at
        wait_for(
            lambda: len([r for r in _missed(operator, job) if r.queued_at > paused_at]) >= 2,
            10,
            "occurrences recorded missed while paused",
        )
        # Once the pause committed, no replica started anything.
        assert not [r for r in _ran(operator, job) if r.started_at and r.started_at > paused_at]

        resumed = operator.jobhost("resume", job, "--reason", "vendor back")
        assert resumed.returncode == 0, resumed.stderr
        back = time.time()
        wait_for(
            lambda: [
                r for r in _ran(operator, job) if r.started_at and r.started_at.timestamp() > back
            ],
            10,
            "a run after the resume",
        )
        assert {r.reason for r in _missed(operator, job)} == {"paused"}
        assert {r.host_id for r in _missed(operator, job)} <= {"replica-a", "replica-b"}
    finally:
        for replica in replicas:
            replica.stop()


def _ran(operator: Operator, job: str) -> list[RunRecord]:
    return [r for r in operator.runs(job) if r.attempt >= 1]


def _missed(operator: Operator, job: str) -> list[RunRecord]:
    return [r for r in operator.runs(job) if r.outcome == "missed"]


def test_pause_and_resume_a_module_or_a_pattern_with_one_reason(operator: Operator) -> None:
    operator.configure(
        [
            {"name": "sample.nightly", "cron": "0 3 * * *"},
            {"name": "sample.hourly", "interval": "1h"},
        ],
        extra_plugin=True,
        modules={"extra": {}},
    )
    user = getpass.getuser()
    done = operator.jobhost("pause", "--module", "sample", "--reason", "vendor outage")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"sample.hourly paused by {user} at ")
    assert lines[1].startswith(f"sample.nightly paused by {user} at ")
    assert lines[2] == "paused 2 of 2 jobs"
    extra = operator.schedule("extra.needs-config")
    assert extra is None or not extra.paused  # another module: untouched
    for job in ("sample.hourly", "sample.nightly"):
        row = operator.schedule(job)
        assert row is not None and (row.paused, row.paused_reason) == (True, "vendor outage")
    resumed = operator.jobhost("resume", "--match", "*.night*", "--reason", "vendor back")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[-1] == "resumed 1 of 1 jobs"
    hourly, nightly = operator.schedule("sample.hourly"), operator.schedule("sample.nightly")
    assert hourly is not None and nightly is not None
    assert (hourly.paused, nightly.paused) == (True, False)
    changes = operator.jobhost("changes").stdout.splitlines()
    assert [line.split("  ")[2:] for line in changes] == [
        ["pause", "sample.hourly: vendor outage"],
        ["pause", "sample.nightly: vendor outage"],
        ["resume", "sample.nightly: vendor back"],
    ]
    nothing = operator.jobhost("pause", "--module", "nope", "--reason", "x")
    assert nothing.returncode == 2
    assert "no job matches --module nope (modules: extra, sample)" in nothing.stderr
    both = operator.jobhost("pause", "sample.hourly", "--module", "sample", "--reason", "x")
    assert both.returncode == 2 and "not both" in both.stderr
    neither = operator.jobhost("resume", "--reason", "x")
    assert neither.returncode == 2 and "--module M or --match GLOB" in neither.stderr
