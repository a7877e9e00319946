"""``jobhost health`` from the store at size, on both stores: its statements do not grow with
the jobs, the critical jobs or the ledger, and its verdicts and details are what the same
checks say over the whole built catalog."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import event, update

from jobhost.operations.health import Health, check_health
from jobhost.store import Store
from jobhost.store.schema import runs, schedules
from tests.cli.operator_support import Operator, now


def test_statements_do_not_grow_with_jobs_critical_jobs_or_runs(operator: Operator) -> None:
    _varied(operator, jobs=12, critical=2, runs_each=1)
    small = _statements(operator)
    _varied(operator, jobs=120, critical=45, runs_each=4)
    large = _statements(operator)

    assert large == small
    # A handful of statements, not a few for each job.
    assert len(small) < 45


def test_the_stored_catalogs_checks_say_what_the_built_catalogs_say(operator: Operator) -> None:
    _varied(operator, jobs=40, critical=12, runs_each=3)

    stored = _checks(check_health(operator.settings, None, Store(operator.engine), hosts=False))
    built = _checks(
        check_health(operator.settings, operator.catalog(), Store(operator.engine), hosts=False)
    )

    del stored["catalog"], built["catalog"]
    assert stored == built
    assert not stored["critical-jobs-last-run"][0]
    assert "sample.job-000 is disabled" not in stored["critical-jobs-scheduled"][1]
    assert "sample.job-003 is paused" in stored["critical-jobs-scheduled"][1]
    # A job that is not critical is looked at for its expired lease alone.
    assert "sample.job-007: " in stored["leases"][1]
    assert "sample.job-011: " in stored["leases"][1]


def test_a_row_whose_declaration_cannot_be_read_is_counted_from_its_columns(
    operator: Operator,
) -> None:
    _varied(operator, jobs=12, critical=2, runs_each=1)
    with operator.engine.begin() as connection:
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == "sample.job-009")
            .values(declaration='{"written by": "another version"}')
        )

    done, result = operator.json("health", "--no-hosts")

    assert done.returncode == 1, done.stderr
    catalog = next(check for check in result["checks"] if check["name"] == "catalog")
    assert "12 jobs" in catalog["detail"]


def _varied(operator: Operator, *, jobs: int, critical: int, runs_each: int) -> None:
    """``jobs`` jobs, every ``jobs // critical``-th critical; failing and succeeding runs; a
    paused critical job; expired leases on a job's row and on a running run."""
    declared: list[dict[str, Any]] = []
    step = max(jobs // critical, 1)
    for index in range(jobs):
        job: dict[str, Any] = {"name": f"sample.job-{index:03d}", "interval": "1h"}
        if index % step == 0 or index == 3:
            job["critical"] = True
        declared.append(job)
    operator.configure(declared)
    operator.sync()
    t = now()
    with operator.engine.begin() as connection:
        connection.execute(runs.delete())
    for index in range(jobs):
        name = f"sample.job-{index:03d}"
        for back in range(runs_each, 0, -1):
            outcome = "failed" if (index + back) % 2 == 0 else "succeeded"
            error = "disk full" if outcome == "failed" else None
            operator.add_run(name, outcome, started=t - timedelta(minutes=5 * back), error=error)
    operator.set_schedule("sample.job-003", paused=True, paused_by="carol", paused_at=t)
    operator.set_schedule(
        "sample.job-007",
        lease_owner="dead-host",
        lease_expires_at=t - timedelta(minutes=2),
        lease_run_id="r-7",
    )
    operator.add_run(
        "sample.job-011", "running", started=t, lease_expires_at=t - timedelta(minutes=1)
    )


def _checks(health: Health) -> dict[str, tuple[bool, str]]:
    return {check.name: (check.ok, check.detail) for check in health.checks}


def _statements(operator: Operator) -> list[str]:
    with _recording(operator) as sent:
        check_health(operator.settings, None, Store(operator.engine), hosts=False)
    return sent


@contextmanager
def _recording(operator: Operator) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(*args: Any) -> None:
        sent.append(" ".join(str(args[2]).split())[:60])

    event.listen(operator.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(operator.engine, "before_cursor_execute", record)
