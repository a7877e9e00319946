"""``jobhost backfill`` without --dry-run: each selected occurrence runs once, here or on hosts."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from jobhost.store import reading
from jobhost.store.schema import backfills, runs
from tests.cli.operator_support import Operator

JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.broken", "cron": "0 3 * * *", "behaviour": "fail"},
    {
        "name": "sample.flaky",
        "cron": "0 3 * * *",
        "behaviour": "fail-once",
        "max_attempts": 2,
        "backoff": "1s",
    },
]
RANGE = ("--from", "2026-11-20", "--to", "2026-11-27")


def night(day: int) -> datetime:
    return datetime(2026, 11, day, 3, tzinfo=UTC)


def prepare(operator: Operator) -> Operator:
    """A week of sample.nightly: a success, failures, a retry that worked, a miss, a gap."""
    operator.configure(JOBS)
    operator.add_run("sample.nightly", "succeeded", occurrence=night(20))
    operator.add_run("sample.nightly", "failed", occurrence=night(21))
    operator.add_run("sample.nightly", "failed", occurrence=night(22))
    operator.add_run("sample.nightly", "succeeded", occurrence=night(22), attempt=2)
    operator.add_run("sample.nightly", "missed", occurrence=night(23))
    operator.add_run("sample.nightly", "timed_out", occurrence=night(24))
    operator.add_run("sample.nightly", "succeeded", occurrence=night(25))
    return operator


def ran(operator: Operator) -> list[list[str]]:
    """What the executors saw, one list per run: job, run id, occurrence, attempt, source, pid."""
    if not operator.run_log.exists():
        return []
    return [line.split() for line in operator.run_log.read_text().splitlines()]


def test_without_a_host_each_selected_occurrence_runs_here_once(operator: Operator) -> None:
    prepare(operator)
    done = operator.jobhost("backfill", "sample.nightly", *RANGE, "--reason", "weekend outage")
    assert done.returncode == 0, done.stderr
    assert "running backfill" in done.stderr
    (backfill_id,) = done.stdout.split()
    seen = ran(operator)
    # context.occurrence is the past occurrence; context.source is backfill.
    assert [(r[2], r[3], r[4]) for r in seen] == [
        ("2026-11-21T03:00:00+00:00", "2", "backfill"),
        ("2026-11-23T03:00:00+00:00", "1", "backfill"),
        ("2026-11-24T03:00:00+00:00", "2", "backfill"),
        ("2026-11-26T03:00:00+00:00", "1", "backfill"),
    ]
    replayed = [r for r in operator.runs("sample.nightly") if r.backfill_id is not None]
    assert {r.backfill_id for r in replayed} == {backfill_id}
    assert {r.outcome for r in replayed} == {"succeeded"}
    assert {r.reason for r in replayed} == {"weekend outage"}
    # Modes missing and failed keep the occurrence's own idempotency key.
    assert sorted(r.idempotency_key or "" for r in replayed) == [
        f"sample.nightly:2026-11-{day}T03:00:00Z" for day in (21, 23, 24, 26)
    ]
    again = operator.jobhost("backfill", "sample.nightly", *RANGE)
    assert (again.returncode, again.stdout) == (0, "")
    assert "nothing to do" in again.stderr
    assert len(ran(operator)) == 4


def test_mode_all_gets_a_key_of_its_own_per_backfill(operator: Operator) -> None:
    prepare(operator)
    done, result = operator.json(
        "backfill", "sample.nightly", "--from", "2026-11-20", "--to", "2026-11-22",
        "--mode", "all", "--concurrency", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (result["selected"], result["succeeded"], result["state"]) == (2, 2, "done")
    replayed = [r for r in operator.runs("sample.nightly") if r.backfill_id is not None]
    assert sorted(r.idempotency_key or "" for r in replayed) == [
        f"sample.nightly:2026-11-{day}T03:00:00Z:backfill:{result['id']}" for day in (20, 21)
    ]
    # The occurrence that had succeeded ran again, as its next attempt.
    assert sorted((r.occurrence, r.attempt) for r in replayed) == [(night(20), 2), (night(21), 2)]


def test_a_failed_occurrence_exits_1_and_show_says_which(operator: Operator) -> None:
    operator.configure(JOBS)
    done, result = operator.json(
        "backfill", "sample.broken", "--from", "2026-11-20", "--to", "2026-11-22"
    )
    assert done.returncode == 1, done.stderr
    assert (result["failed"], result["succeeded"], result["state"]) == (2, 0, "done")
    shown, detail = operator.json("backfill", "--show", result["id"])
    assert shown.returncode == 0, shown.stderr
    assert [i["state"] for i in detail["items"]] == ["failed", "failed"]


def test_a_retry_belongs_to_the_backfill_and_settles_its_occurrence(operator: Operator) -> None:
    operator.configure(JOBS)
    done, result = operator.json(
        "backfill", "sample.flaky", "--from", "2026-11-20", "--to", "2026-11-21"
    )
    assert done.returncode == 0, done.stderr
    assert (result["selected"], result["succeeded"]) == (1, 1)
    attempts = operator.runs("sample.flaky")
    assert [(r.attempt, r.source, r.outcome, r.backfill_id) for r in attempts] == [
        (1, "backfill", "failed", result["id"]),
        (2, "retry", "succeeded", result["id"]),
    ]
    assert {r.idempotency_key for r in attempts} == {"sample.flaky:2026-11-20T03:00:00Z"}


def test_unknown_job_exits_3_not_2(sqlite_operator: Operator) -> None:
    sqlite_operator.configure(JOBS)
    done = sqlite_operator.jobhost("backfill", "sample.nightlly", *RANGE)
    assert done.returncode == 3, done.stderr
    assert "unknown job 'sample.nightlly'" in done.stderr


def test_no_wait_records_it_and_list_show_cancel_manage_it(operator: Operator) -> None:
    prepare(operator)
    done = operator.jobhost("backfill", "sample.nightly", *RANGE, "--no-wait", "--reason", "x")
    assert done.returncode == 0, done.stderr
    (backfill_id,) = done.stdout.split()
    assert ran(operator) == []  # no host: nothing ran, the backfill waits in the store
    listed, rows = operator.json("backfill", "--list")
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["state"], r["pending"]) for r in rows] == [(backfill_id, "running", 4)]
    unsaid = operator.jobhost("backfill", "--cancel", backfill_id)
    assert unsaid.returncode == 2 and "--cancel needs --reason" in unsaid.stderr
    assert operator.json("backfill", "--list")[1][0]["state"] == "running"
    cancelled = operator.jobhost("backfill", "--cancel", backfill_id, "--reason", "wrong week")
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled" in cancelled.stdout
    with reading(operator.engine) as connection:
        state = connection.execute(
            select(backfills.c.state, backfills.c.finished_at).where(backfills.c.id == backfill_id)
        ).one()
        waiting = connection.execute(
            select(runs.c.id).where(runs.c.backfill_id == backfill_id)
        ).all()
        assert state.state == "cancelled" and state.finished_at is not None
        # Its occurrences never started leave no run behind; the backfill still counts them.
        assert waiting == []
    shown, record = operator.json("backfill", "--show", backfill_id)
    assert shown.returncode == 0, shown.stderr
    assert record["pending"] == 4
    changes, log = operator.json("changes", "--job", "sample.nightly")
    assert changes.returncode == 0, changes.stderr
    actions = [entry["action"] for entry in log["changes"]]
    assert "backfill" in actions and "backfill-cancel" in actions
    unknown = operator.jobhost("backfill", "--show", "nope")
    assert unknown.returncode == 3
    assert "no backfill 'nope'" in unknown.stderr
