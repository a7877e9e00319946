"""The overview's summary says of every job what ``jobhost report`` says, on both stores: the
same status, state, reasons (code and text), next fire and last attempt, and the same counts,
over a catalog that has each kind of job the overview shows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobhost.operations.report import JobReport, build_report, read_summary
from jobhost.store import Store
from tests.cli.operator_support import Operator, now

JOBS: list[dict[str, Any]] = [
    {"name": "sample.fine", "interval": "1h"},
    {"name": "sample.berlin", "cron": "*/15 * * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.york", "cron": "30 2 * * *", "timezone": "America/New_York"},
    {"name": "sample.kolkata", "cron": "5 * * * 1-5", "timezone": "Asia/Kolkata"},
    {"name": "sample.critical-failing", "interval": "10m", "critical": True},
    {"name": "sample.failing", "cron": "0 * * * *", "timezone": "UTC"},
    {"name": "sample.never-ran", "interval": "1h"},
    {"name": "sample.never-ran-cron", "cron": "0 3 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.graced", "interval": "1h", "overdue_after": "3d"},
    {"name": "sample.behind", "interval": "5m"},
    {"name": "sample.paused", "interval": "1h"},
    {"name": "sample.disabled", "interval": "1h", "enabled": False},
    {"name": "sample.running", "interval": "30m"},
    {"name": "sample.lease-expired", "interval": "30m"},
    {"name": "sample.overridden", "interval": "1h"},
]


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(JOBS, overrides={"sample.overridden": {"interval": "2h"}})
    made.sync()
    yield made
    made.close()


def test_every_job_reads_as_the_report_says(operator: Operator) -> None:
    at = now()
    days_ago = at - timedelta(days=3)
    for name in ("sample.never-ran", "sample.never-ran-cron", "sample.graced", "sample.york"):
        operator.set_schedule(name, created_at=days_ago, interval_anchor=days_ago)
    operator.add_run("sample.fine", "succeeded", started=at - timedelta(minutes=20))
    operator.add_run("sample.berlin", "succeeded", started=at - timedelta(hours=6))
    operator.add_run("sample.kolkata", "failed", started=at - timedelta(hours=2), error="boom")
    operator.add_run("sample.critical-failing", "succeeded", started=at - timedelta(hours=3))
    operator.add_run(
        "sample.critical-failing",
        "timed-out",
        started=at - timedelta(minutes=30),
        error="\n  took longer than 5m\nsecond line",
    )
    operator.add_run("sample.failing", "failed", started=at - timedelta(minutes=40), error="503")
    operator.set_schedule("sample.behind", next_occurrence=at - timedelta(hours=2))
    operator.set_schedule(
        "sample.paused",
        paused=True,
        paused_by="ops",
        paused_at=at - timedelta(hours=1),
        paused_reason="vendor outage",
    )
    operator.add_run("sample.running", "succeeded", started=at - timedelta(hours=1))
    operator.add_run("sample.running", "running", started=at - timedelta(minutes=1))
    operator.add_run(
        "sample.lease-expired",
        "running",
        started=at - timedelta(hours=2),
        lease_expires_at=at - timedelta(hours=1),
    )
    operator.add_orphan("sample.gone")
    operator.add_host("replica-0")
    settings, catalog = operator.settings, operator.catalog()

    summary = read_summary(settings, catalog, Store(operator.engine))
    report = build_report(settings, catalog, Store(operator.engine))

    assert [_seen(job) for job in summary.jobs] == [_seen(job) for job in report.jobs]
    assert summary.summary == report.summary
    statuses = {job.name: job.status for job in summary.jobs}
    # The catalog shows each status the overview counts, so a wrong one cannot hide.
    assert {"ok", "failing", "overdue", "paused", "disabled", "running", "behind"} <= set(
        statuses.values()
    ), statuses
    codes = {m.code for job in summary.jobs for m in job.mismatches}
    assert {"overdue", "next-fire-past", "paused", "orphaned", "override", "lease-expired"} <= (
        codes
    ), codes


def _seen(job: JobReport) -> tuple[object, ...]:
    """What the overview shows of a job (its last attempt as the schedule row keeps it: no
    host, and the error's text)."""
    last = job.last_run
    return (
        job.name,
        job.module,
        job.description,
        job.critical,
        job.enabled,
        job.paused,
        job.state,
        job.status,
        job.declared_trigger,
        job.effective_trigger,
        job.next_fire,
        [m.text() for m in job.mismatches],
        job.running,
        job.concurrency_group,
        job.waiting_for,
        None
        if last is None
        else (
            last.id,
            last.outcome,
            last.started_at,
            last.finished_at,
            last.error_message or last.error_type,
        ),
    )
