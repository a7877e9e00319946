"""``jobhost health``: the release gate, each check passing and failing with its reason."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update

from jobhost.store.actions import pause_job
from jobhost.store.schema import hosts, runs, schedules
from tests.cli.operator_support import Operator, now

CHECKS = [
    "store",
    "catalog",
    "critical-jobs-scheduled",
    "live-host",
    "leases",
    "critical-jobs-last-run",
    "clock-skew",
    "schedule-lag",
    "store-integrity",
    "stuck-runs",
]
JOBS = [
    {"name": "sample.billing", "cron": "0 3 * * *", "critical": True},
    {"name": "sample.hourly", "interval": "1h", "critical": True},
    {"name": "sample.cleanup", "interval": "1h"},
]


def _healthy(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    t = now()
    operator.add_run("sample.billing", "succeeded", started=t - timedelta(minutes=20))
    operator.add_run("sample.hourly", "succeeded", started=t - timedelta(minutes=10))
    # A heartbeat of a minute keeps the host alive across the test's commands on a busy machine.
    operator.add_host("replica-0", skew=0.2, heartbeat=60)


def _verdicts(result: dict[str, Any]) -> dict[str, bool]:
    return {check["name"]: check["ok"] for check in result["checks"]}


def _detail(result: dict[str, Any], name: str) -> str:
    return str(next(c["detail"] for c in result["checks"] if c["name"] == name))


def test_every_check_passes_on_a_healthy_store(operator: Operator) -> None:
    _healthy(operator)
    done, result = operator.json("health")
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["ok"] is True
    assert [check["name"] for check in result["checks"]] == CHECKS
    assert all(set(check) == {"name", "ok", "detail"} for check in result["checks"])
    assert all(_verdicts(result).values())
    assert "replica-0" in _detail(result, "live-host")
    text = operator.jobhost("health")
    assert text.returncode == 0, text.stdout
    assert text.stdout.splitlines()[-1] == "healthy: all 10 checks passed"
    verdicts = [line for line in text.stdout.splitlines()[:-1] if not line.startswith(" ")]
    assert len(verdicts) == len(CHECKS)
    assert all(line.startswith("PASS  ") for line in verdicts)


def test_each_check_on_the_jobs_hosts_and_leases_fails_with_why(operator: Operator) -> None:
    _healthy(operator)
    t = now()
    with operator.engine.begin() as connection:
        pause_job(connection, "sample.billing", "carol", "migration", t)
    operator.set_schedule("sample.hourly", next_occurrence=t - timedelta(hours=3))
    operator.add_run("sample.billing", "failed", started=t - timedelta(minutes=5), error="boom")
    operator.set_schedule(
        "sample.cleanup",
        lease_owner="dead-host",
        lease_expires_at=t - timedelta(minutes=1),
        lease_run_id="r-1",
    )
    with operator.engine.begin() as connection:
        connection.execute(
            update(hosts).values(last_seen_at=t, host_clock_at=t + timedelta(seconds=5))
        )
    done, result = operator.json("health")
    assert done.returncode == 1
    assert result["ok"] is False
    assert _verdicts(result) == {
        "store": True,
        "catalog": True,
        "critical-jobs-scheduled": False,
        "live-host": True,
        "leases": False,
        "critical-jobs-last-run": False,
        "clock-skew": False,
        "schedule-lag": True,
        "store-integrity": True,
        "stuck-runs": True,
    }
    scheduled = _detail(result, "critical-jobs-scheduled")
    assert "sample.billing is paused by carol" in scheduled and "migration" in scheduled
    assert "sample.hourly's next fire" in scheduled and "in the past" in scheduled
    last_run = _detail(result, "critical-jobs-last-run")
    assert (
        "sample.billing has 1 open failure(s)" in last_run
        and "failed" in last_run
        and "boom" in last_run
    )
    assert "sample.hourly is overdue" not in last_run
    assert "dead-host" in _detail(result, "leases")
    assert "host replica-0 is +5.000s off" in _detail(result, "clock-skew")

    # The hourly job's only success ages past its period plus grace; the host goes silent.
    day_ago = t - timedelta(days=1)
    # Its run, and the summary of it the schedule row keeps, both a day old.
    operator.set_schedule(
        "sample.hourly",
        created_at=day_ago - timedelta(days=1),
        last_started_at=day_ago,
        last_finished_at=day_ago,
        last_success_at=day_ago,
    )
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.job_name == "sample.hourly")
            .values(queued_at=day_ago, started_at=day_ago, finished_at=day_ago)
        )
        connection.execute(update(hosts).values(last_seen_at=t - timedelta(minutes=10)))
    text = operator.jobhost("health")
    assert text.returncode == 1
    assert "FAIL  live-host                no host is alive" in text.stdout
    assert "PASS  clock-skew" in text.stdout
    assert text.stdout.splitlines()[-1] == "unhealthy: 4 of 10 checks failed"
    done, result = operator.json("health", "--no-hosts")
    assert done.returncode == 1
    assert _detail(result, "live-host") == "skipped (--no-hosts)"
    assert _verdicts(result)["live-host"] is True
    assert "sample.hourly is overdue" in _detail(result, "critical-jobs-last-run")


def test_schedule_lag_fails_when_the_hosts_fall_behind(operator: Operator) -> None:
    _healthy(operator)
    t = now()
    with operator.engine.begin() as connection:
        connection.execute(update(hosts).values(schedule_lag_seconds=0.25))
    # Due 30 s ago and not claimed yet: behind, but within the default 60 s.
    operator.set_schedule("sample.cleanup", due_at=t - timedelta(seconds=30))
    done, result = operator.json("health")
    assert _verdicts(result)["schedule-lag"] is True, result
    assert "replica-0 0.2s" in _detail(result, "schedule-lag")
    # Two minutes: nobody keeps up.
    operator.set_schedule("sample.cleanup", due_at=t - timedelta(minutes=2))
    done, result = operator.json("health")
    assert done.returncode == 1
    assert _verdicts(result)["schedule-lag"] is False
    detail = _detail(result, "schedule-lag")
    assert "old (limit 1m)" in detail and "falling behind" in detail
    # The setting moves the limit.
    operator.configure(JOBS, max_schedule_lag="5m")
    done, result = operator.json("health")
    assert _verdicts(result)["schedule-lag"] is True, result


def test_store_integrity_and_stuck_runs_name_the_job_the_row_and_the_fix(
    operator: Operator,
) -> None:
    _healthy(operator)
    t = now()
    operator.add_run("sample.cleanup", "running", started=t - timedelta(minutes=3))
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.job_name == "sample.cleanup")
            .values(
                lease_expires_at=t + timedelta(days=400),
                error_type="Stuck",
                error_message="stuck: executor ignored cancellation (timeout) for 30s",
            )
        )
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == "sample.hourly")
            .values(fencing_token=-3)
        )
    done, result = operator.json("health")
    assert done.returncode == 1
    verdicts = _verdicts(result)
    assert verdicts["store-integrity"] is False and verdicts["stuck-runs"] is False
    integrity = _detail(result, "store-integrity")
    assert "sample.hourly (schedules): fencing_token is -3" in integrity
    assert "sample.cleanup (runs " in integrity and "further ahead" in integrity
    stuck = _detail(result, "stuck-runs")
    assert "sample.cleanup run" in stuck and "ignored cancellation" in stuck
    assert "context.cancellation" in stuck


def test_store_and_catalog_checks_fail_with_why(operator: Operator) -> None:
    operator.configure(JOBS, migrate=False)
    with operator.engine.connect():
        pass  # an empty store: on SQLite the file exists, with no schema in it
    done, result = operator.json("health", "--no-hosts")
    assert done.returncode == 1
    assert _verdicts(result)["store"] is False
    assert "schema at revision none" in _detail(result, "store")
    assert "jobhost db upgrade" in _detail(result, "store")
    # The catalog the checks read is the store's: not known while the store is not.
    assert _detail(result, "catalog") == "not checked: the store is unavailable"
    assert _detail(result, "leases") == "not checked: the store is unavailable"
    assert _detail(result, "live-host") == "skipped (--no-hosts)"
    done, result = operator.json("health", "--no-hosts", "--check-catalog")
    assert _verdicts(result)["catalog"] is True

    operator.configure(JOBS, modules={"extra": {"broken": True}}, extra_plugin=True)
    done, result = operator.json("health", "--no-hosts")
    assert _verdicts(result)["catalog"] is True
    done, result = operator.json("health", "--no-hosts", "--check-catalog")
    assert done.returncode == 1
    assert _verdicts(result)["store"] is True
    assert _verdicts(result)["catalog"] is False
    assert "extra.broken (module extra) [cron-syntax]" in _detail(result, "catalog")


def test_an_unreachable_store_fails_the_store_check(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-directory" / "store.db"
    operator = Operator(f"sqlite:///{missing}", tmp_path)
    try:
        operator.configure(JOBS, migrate=False)
        done, result = operator.json("health")
        assert done.returncode == 1
        assert f"no store at {missing}: the file does not exist" in _detail(result, "store")
        assert not missing.parent.exists(), "health must not create the store"
        assert _detail(result, "critical-jobs-scheduled") == (
            "not checked: the store is unavailable"
        )
    finally:
        operator.close()


def test_a_detail_names_ten_jobs_then_how_many_more(operator: Operator) -> None:
    names = [f"sample.critical-{n:02d}" for n in range(25)]
    operator.configure([{"name": name, "interval": "1h", "critical": True} for name in names])
    operator.sync()
    t = now()
    for name in names:
        operator.add_run(name, "failed", started=t - timedelta(minutes=5), error="boom")
    done, result = operator.json("health", "--no-hosts")
    assert done.returncode == 1
    detail = _detail(result, "critical-jobs-last-run")
    listed = [name for name in names if f"{name} has 1 open" in detail]
    assert listed == names[:10]
    assert detail.endswith("; and 15 more")
    text = " ".join(operator.jobhost("health", "--no-hosts").stdout.split())
    assert [name for name in names if f"{name} has 1 open" in text] == names[:10]
    assert "; and 15 more PASS" in text


def test_a_run_of_any_job_holding_an_expired_lease_fails_the_leases_check(
    operator: Operator,
) -> None:
    # health reports only the jobs its checks look at: a job that is not critical is one of
    # them when a run of it still holds a lease that expired.
    _healthy(operator)
    t = now()
    run_id = operator.add_run(
        "sample.cleanup",
        "running",
        started=t - timedelta(minutes=10),
        host="dead-host",
        lease_expires_at=t - timedelta(minutes=2),
    )
    done, result = operator.json("health")
    assert done.returncode == 1, done.stdout + done.stderr
    assert _verdicts(result)["leases"] is False
    assert _verdicts(result)["critical-jobs-last-run"] is True
    leases = _detail(result, "leases")
    assert leases.startswith("sample.cleanup: ")
    assert f"run {run_id} on host dead-host" in leases
