"""Open failures, on both stores, through the real command: a failure stays open until its
work succeeds (a retry, a backfill of its occurrence; a retry of a manual run) or an operator
acknowledges it; repeats group into one line; ``retry --failed`` queues one retry of each open
failure, each in the change log; ``health`` fails while a critical job has one."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.cli.operator_support import Operator, now

NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *", "critical": True}
PING = {"name": "sample.ping", "interval": "1m"}


def _night(back: int) -> datetime:
    return now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=back)


def _fail_three_nights(operator: Operator) -> dict[int, str]:
    operator.configure([NIGHTLY, PING]).sync()
    return {
        back: operator.add_run(
            "sample.nightly",
            "failed",
            occurrence=_night(back),
            started=_night(back),
            error="connection refused",
        )
        for back in (3, 2, 1)
    }


def _open(operator: Operator, *args: str) -> list[str]:
    done, found = operator.json("failures", *args)
    assert done.returncode == 0, done.stderr
    return [row["run_id"] for row in found["failures"]]


def test_a_retry_and_a_backfill_resolve_their_nights_and_bulk_retry_takes_the_rest(
    operator: Operator,
) -> None:
    failed = _fail_three_nights(operator)
    assert _open(operator, "--job", "sample.nightly") == [failed[1], failed[2], failed[3]]
    # Night 3 retried by an operator, night 2 replayed by a backfill: both succeed.
    later = now() - timedelta(minutes=5)
    operator.add_run(
        "sample.nightly",
        "succeeded",
        occurrence=_night(3),
        attempt=2,
        source="retry",
        started=later,
    )
    operator.add_run(
        "sample.nightly",
        "succeeded",
        occurrence=_night(2),
        attempt=2,
        source="backfill",
        started=later,
        host="replica-7",
    )
    assert _open(operator, "--job", "sample.nightly") == [failed[1]]
    _all, everything = operator.json("failures", "--job", "sample.nightly", "--all")
    resolved = {row["run_id"]: row["resolved"] for row in everything["failures"]}
    assert resolved[failed[1]] is None
    assert resolved[failed[2]]["how"] == "succeeded"
    assert resolved[failed[2]]["by"] == "replica-7"
    listed = operator.jobhost("failures", "--job", "sample.nightly", "--all").stdout
    assert "retried by replica-7" in listed

    queued = operator.jobhost(
        "retry", "--failed", "--job", "sample.nightly", "--reason", "after the fix"
    )
    assert queued.returncode == 0, queued.stderr
    assert f"retrying failed run {failed[1]}" in queued.stdout
    assert "1 retry queued" in queued.stdout
    assert "no live host: they stay queued" in queued.stdout
    pending = [r for r in operator.runs("sample.nightly") if r.outcome == "pending"]
    assert [(r.occurrence, r.attempt, r.source) for r in pending] == [(_night(1), 2, "retry")]
    _done, changes = operator.json("changes", "--job", "sample.nightly")
    retries = [c for c in changes["changes"] if c["action"] == "retry"]
    assert [c["before"]["run_id"] for c in retries] == [failed[1]]
    # Once: a second bulk retry finds the retry already queued and refuses it.
    again = operator.jobhost("retry", "--failed", "--job", "sample.nightly", "--reason", "again")
    assert again.returncode == 3
    assert "refused" in again.stdout and "pending" in again.stdout


def test_retry_failed_by_module_and_since(operator: Operator) -> None:
    failed = _fail_three_nights(operator)
    since = (_night(1) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    done, result = operator.json(
        "retry", "--failed", "--module", "sample", "--since", since, "--reason", "r"
    )
    assert done.returncode == 0, done.stderr
    assert sorted(q["retry_of"] for q in result["queued"]) == sorted([failed[1]])
    assert result["hosts_alive"] == 0 and result["more"] is False
    unknown = operator.jobhost("retry", "--failed", "--module", "nope", "--reason", "r")
    assert unknown.returncode == 2 and "--module" in unknown.stderr
    neither = operator.jobhost("retry", "--reason", "r")
    assert neither.returncode == 2


def test_an_acknowledged_failure_is_closed_and_health_follows(operator: Operator) -> None:
    failed = _fail_three_nights(operator)
    operator.add_run(
        "sample.nightly", "succeeded", occurrence=_night(0), started=now() - timedelta(minutes=1)
    )
    # The newest night succeeded, yet three failed nights are open: health fails.
    sick = operator.jobhost("health", "--no-hosts")
    assert sick.returncode == 1
    assert "sample.nightly has 3 open" in " ".join(sick.stdout.split())
    for back in (3, 2):
        # The run id's start a line of `jobhost failures` shows is enough.
        typed = failed[back][:8] if back == 3 else failed[back]
        done = operator.jobhost("failures", "--ack", typed, "--reason", "data fixed by hand")
        assert done.returncode == 0, done.stderr
        assert f"acknowledged failure {failed[back]}" in done.stdout
    assert operator.jobhost("health", "--no-hosts").returncode == 1
    twice = operator.jobhost("failures", "--ack", failed[2], "--reason", "again")
    assert twice.returncode == 3 and "resolved already" in twice.stderr
    ok_run = operator.add_run("sample.ping", "succeeded")
    not_failed = operator.jobhost("failures", "--ack", ok_run, "--reason", "x")
    assert not_failed.returncode == 3 and "not a failure" in not_failed.stderr
    no_reason = operator.jobhost("failures", "--ack", failed[1])
    assert no_reason.returncode == 2
    # Night 1's retry succeeds: nothing is open, health passes.
    operator.add_run("sample.nightly", "succeeded", occurrence=_night(1), attempt=2, source="retry")
    assert _open(operator, "--job", "sample.nightly") == []
    healthy = operator.jobhost("health", "--no-hosts")
    assert healthy.returncode == 0, healthy.stdout
    done, changes = operator.json("changes", "--job", "sample.nightly")
    acks = [c for c in changes["changes"] if c["action"] == "ack"]
    assert [c["after"]["run_id"] for c in acks] == [failed[3], failed[2]]
    assert acks[0]["reason"] == "data fixed by hand"
    done, everything = operator.json("failures", "--job", "sample.nightly", "--all")
    how = {row["run_id"]: row["resolved"]["how"] for row in everything["failures"]}
    assert how == {failed[1]: "succeeded", failed[2]: "acknowledged", failed[3]: "acknowledged"}


def test_a_manual_run_is_resolved_by_a_retry_of_it(operator: Operator) -> None:
    operator.configure([{"name": "sample.once", "interval": "1d", "behaviour": "fail-once"}])
    operator.sync()
    manual = operator.add_run(
        "sample.once",
        "failed",
        source="manual",
        started=now() - timedelta(minutes=3),
        error="first attempt fails",
    )
    assert _open(operator) == [manual]
    retried = operator.jobhost("retry", manual, "--reason", "once more")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert _open(operator) == []


def test_repeats_of_one_job_and_error_are_one_line(operator: Operator) -> None:
    operator.configure([NIGHTLY, PING]).sync()
    t = now() - timedelta(hours=1)
    for minute in range(30):
        operator.add_run(
            "sample.ping",
            "failed",
            occurrence=t + timedelta(minutes=minute),
            started=t + timedelta(minutes=minute),
            error="connection refused",
        )
    night = operator.add_run(
        "sample.nightly", "failed", occurrence=_night(1), started=_night(1), error="disk full"
    )
    lines = operator.jobhost("failures").stdout.splitlines()
    assert len(lines) == 2, lines
    assert "sample.ping \N{MULTIPLICATION SIGN} 30" in lines[0]
    assert "sample.nightly" in lines[1] and night[:8] in lines[1]
    _done, found = operator.json("failures")
    groups = [(g["job"], g["count"]) for g in found["groups"]]
    assert groups == [("sample.ping", 30), ("sample.nightly", 1)]
