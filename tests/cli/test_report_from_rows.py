"""The store's catalog reported straight from its rows gives what rebuilding every job gives.

``jobhost report``, ``report --json`` and ``health`` (without ``--check-catalog``) read each job
from its schedule row and stored declaration, rebuilding no job. The report they give must be
the one the full path gives (every job rebuilt with ``catalog_of``, then ``report_from``) for
every kind of job: overridden, disabled until configured, paused, holding an expired lease,
overdue, failing, running, orphaned, and rows whose declaration this version cannot read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.operations.jobs import catalog_of
from jobhost.operations.render import Style, report_lines
from jobhost.operations.report import JobReport, report_from, stored_jobs
from jobhost.store import reading
from jobhost.store.snapshot import read_snapshot, take_census
from tests.cli.operator_support import Operator, now

JOBS = [
    {"name": "sample.plain", "interval": "1h", "description": "hourly", "lease": "20m"},
    {"name": "sample.berlin", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.skip-gap", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
     "dst_gap": "skip", "critical": True},
    {"name": "sample.overridden", "cron": "0 3 * * *"},
    {"name": "sample.switched-off", "interval": "15m"},
    {"name": "sample.paused", "interval": "5m"},
    {"name": "sample.leased", "interval": "5m"},
    {"name": "sample.overdue", "cron": "*/10 * * * *", "critical": True},
    {"name": "sample.failing", "interval": "10m"},
    {"name": "sample.running", "interval": "10m"},
    {"name": "sample.no-declaration", "interval": "2h"},
    {"name": "sample.other-version", "cron": "0 4 * * *", "timezone": "Asia/Kolkata"},
]  # fmt: skip


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(
        JOBS,
        overrides={
            "sample.overridden": {"cron": "0 5 * * *", "timezone": "America/New_York"},
            "sample.switched-off": {"enabled": False},
        },
        extra_plugin=True,
    )
    made.sync()
    yield made
    made.close()


def test_every_kind_of_job_reads_the_same_from_its_row(operator: Operator) -> None:
    _every_kind_of_job(operator)

    settings = operator.settings
    snapshot = read_snapshot(operator.engine, ())
    rebuilt = report_from(
        settings, catalog_of(settings, snapshot.schedules.values()), snapshot, compare=False
    )
    from_rows = report_from(settings, None, snapshot)

    assert from_rows == rebuilt
    statuses = {job.name: job.status for job in from_rows.jobs}
    assert statuses["sample.paused"] == "paused"
    assert statuses["sample.leased"] == "stuck"
    assert statuses["sample.overdue"] == "overdue"
    assert statuses["sample.failing"] == "failing"
    assert statuses["sample.running"] == "running"
    assert statuses["sample.gone"] == "orphaned"
    assert statuses["extra.needs-config"] == "disabled"
    codes = {m.code for job in from_rows.jobs for m in job.mismatches}
    assert {"override", "not-configured", "paused", "lease-expired", "overdue"} <= codes
    one = report_from(settings, None, snapshot, job="sample.skip-gap")
    assert one.jobs == [j for j in rebuilt.jobs if j.name == "sample.skip-gap"]
    assert one.jobs[0].effective_trigger.dst_policy() == "dst_gap=skip"


def test_the_one_line_report_reads_no_recent_outcomes_and_prints_the_same(
    operator: Operator,
) -> None:
    _every_kind_of_job(operator)
    settings = operator.settings
    full = read_snapshot(operator.engine, ())
    # One instant for both reads (PostgreSQL's clock moves between them).
    lean = replace(read_snapshot(operator.engine, (), recent=False), now=full.now)

    with_recent, without = report_from(settings, None, full), report_from(settings, None, lean)

    failing = next(job for job in with_recent.jobs if job.name == "sample.failing")
    assert failing.recent_outcomes == ["failed"]  # the full read has outcomes to leave out
    assert not any(lean.recent_outcomes.values())
    # Nor the last attempts' ledger rows: the schedule row records the rest of each.
    assert without.jobs == [_one_line(job) for job in with_recent.jobs]
    assert failing.last_run is not None and failing.last_run.host_id == "replica-0"
    plain = Style(colour=False)
    assert report_lines(without, plain) == report_lines(with_recent, plain)


def _one_line(job: JobReport) -> JobReport:
    """``job`` as the one-line text reads it: no newest outcomes, and of its last finished
    attempt what the schedule row records (no host, error type or backfill)."""
    last = job.last_run
    if last is not None and last.outcome != "running":
        last = replace(last, host_id=None, error_type=None, backfill_id=None)
    return replace(job, recent_outcomes=[], last_run=last)


def _every_kind_of_job(operator: Operator) -> None:
    at = now()
    operator.add_host("replica-0")
    operator.set_schedule(
        "sample.paused", paused=True, paused_by="ops", paused_at=at, paused_reason="disk"
    )
    operator.set_schedule(
        "sample.leased",
        lease_owner="replica-9",
        lease_expires_at=at - timedelta(minutes=3),
        lease_run_id="r-1",
    )
    operator.set_schedule("sample.overdue", created_at=at - timedelta(days=2))
    operator.add_run("sample.overdue", "succeeded", started=at - timedelta(days=1))
    operator.add_run("sample.failing", "failed", started=at - timedelta(minutes=4), error="boom")
    operator.add_run("sample.running", "running", lease_expires_at=at + timedelta(minutes=5))
    operator.add_run("sample.plain", "missed", started=at - timedelta(hours=2))
    operator.set_schedule("sample.no-declaration", declaration=None)
    operator.set_schedule("sample.other-version", declaration='{"format": 99}')
    operator.add_orphan("sample.gone")


def test_the_stored_jobs_count_flag_and_lease_as_the_rebuilt_catalog(operator: Operator) -> None:
    operator.set_schedule("sample.no-declaration", declaration=None)
    operator.add_orphan("sample.gone")
    settings = operator.settings
    rows = read_snapshot(operator.engine, ()).schedules
    catalog = catalog_of(settings, rows.values())

    with reading(operator.engine) as connection:
        census = take_census(connection, now())
        jobs = stored_jobs(settings, census.declared, census.rows)

    assert jobs.count == len(catalog.jobs) == len(JOBS) + 1
    assert jobs.critical == sorted(
        name for name, spec in catalog.jobs.items() if spec.declaration.critical
    )
    assert jobs.critical == ["sample.overdue", "sample.skip-gap"]
    assert jobs.longest_lease == timedelta(minutes=20)
