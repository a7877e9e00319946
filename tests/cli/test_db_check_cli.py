"""``jobhost db check`` and ``db check --full``: the bounded check of what a host reads, and the
streaming audit of every row, as real processes on both stores."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from jobhost.store.schema import runs, schedules
from tests.cli.operator_support import Operator, now

JOBS = [
    {"name": "sample.billing", "cron": "0 3 * * *"},
    {"name": "sample.cleanup", "interval": "1h"},
]


def test_a_clean_store_passes_both_checks_and_says_what_they_read(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    for _ in range(3):
        operator.add_run("sample.billing", "succeeded", started=now() - timedelta(hours=1))
    operator.add_run("sample.cleanup", "running", lease_expires_at=now() + timedelta(seconds=30))
    bounded = operator.jobhost("db", "check")
    assert bounded.returncode == 0, bounded.stdout + bounded.stderr
    assert bounded.stdout.splitlines()[0] == (
        "checked 2 schedule rows, 1 live runs, 0 hosts, 1 signal rows: 0 row(s) a host cannot use"
    )
    assert "row(s) read" not in bounded.stdout
    full = operator.jobhost("db", "check", "--full")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "runs: 4 row(s) read" in full.stdout
    assert full.stdout.splitlines()[-1].startswith("full audit finished: schedules 2, runs 4, ")
    assert full.stdout.splitlines()[-1].endswith("0 problem(s)")


def test_backfill_runs_are_no_damage(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    past = now() - timedelta(days=2)
    operator.add_run("sample.billing", "succeeded", occurrence=past, source="backfill")
    operator.add_run("sample.billing", "pending", occurrence=past, attempt=2, source="backfill")
    for args in (("db", "check"), ("db", "check", "--full")):
        done = operator.jobhost(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "backfill" not in done.stdout
    assert "PASS  store-integrity" in operator.jobhost("health", "--no-hosts").stdout


def test_damage_a_host_never_reads_is_found_only_by_the_full_audit(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    done = operator.add_run("sample.billing", "succeeded", started=now() - timedelta(hours=1))
    with operator.engine.begin() as connection:
        connection.execute(update(runs).where(runs.c.id == done).values(outcome="exploded"))
    bounded = operator.jobhost("db", "check")
    assert bounded.returncode == 0, bounded.stdout + bounded.stderr
    health = operator.jobhost("health", "--no-hosts")
    assert "PASS  store-integrity" in health.stdout
    assert "checked 2 schedule rows, 0 live runs" in health.stdout
    full = operator.jobhost("db", "check", "--full")
    assert full.returncode == 1
    assert f"sample.billing (runs {done}): outcome is 'exploded', not one of" in full.stdout
    assert "1 problem(s)" in full.stdout.splitlines()[-1]


def test_damage_a_host_reads_fails_both_with_the_row_and_the_fix(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    with operator.engine.begin() as connection:
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == "sample.cleanup")
            .values(fencing_token=-3)
        )
    for args in (("db", "check"), ("db", "check", "--full")):
        result = operator.jobhost(*args)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.splitlines()[0].endswith(": 1 row(s) a host cannot use")
        assert "  sample.cleanup (schedules): fencing_token is -3, below 0" in result.stdout
