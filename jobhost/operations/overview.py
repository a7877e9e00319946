"""The dashboard's overview: every job's status from the schedule table, one page in detail.

The report reads each job's newest ledger rows (a lateral join over the whole catalog); the
overview needs none of them. The store keeps each job's last finished attempt on its schedule
row (outcome, times, error, last success), written in the transaction that records the run, as
the ``/metrics`` gauges read it. So the overview reads the schedules, hosts, groups and running
runs (each by index), and computes every status exactly as the report does
(:func:`~jobhost.operations.report.report_from`). Only the page shown reads further: the
failure streak of each failing job on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jobhost.catalog import Catalog
from jobhost.clock import Clock
from jobhost.config import Settings
from jobhost.operations.report import JobReport, Report, report_from
from jobhost.operations.selection import JobFilter, select_jobs
from jobhost.operations.status import FAILED_OUTCOMES
from jobhost.operations.uncollected import uncollected
from jobhost.records import LastAttempt
from jobhost.store import Store

__all__ = ["ERROR_LINE", "Overview", "OverviewJob", "overview_page", "read_summary"]

ERROR_LINE = 160
"""How many characters of an error's first line the overview shows."""


@dataclass(frozen=True)
class OverviewJob:
    """One row of the overview's table."""

    job: JobReport
    streak: int
    """Failures since the last success; 0 unless the last attempt failed."""
    error_line: str | None
    """The first line of the last attempt's error, cut to :data:`ERROR_LINE` characters."""


@dataclass(frozen=True)
class Overview:
    """A page of the overview under a filter."""

    jobs: list[OverviewJob]
    matched: int
    page: int
    pages: int


def read_summary(
    settings: Settings, catalog: Catalog, store: Store, clock: Clock | None = None
) -> Report:
    """Every job with its status, from one read of the schedule, host and running tables."""
    with uncollected():
        return _summary(settings, catalog, store, clock)


def overview_page(
    store: Store, summary: Report, which: JobFilter, page: int, size: int
) -> Overview:
    """Page ``page`` (from 1, clamped) of the jobs ``which`` keeps, ``size`` a page, with the
    failure streaks of the failing ones read for that page alone."""
    jobs = select_jobs(summary.jobs, which)
    pages = max(math.ceil(len(jobs) / size), 1)
    page = min(max(page, 1), pages)
    shown = jobs[(page - 1) * size : page * size]
    failing = [job.name for job in shown if _failed(job)]
    streaks: dict[str, int] = {}
    if failing:
        streaks = store.failure_streaks(failing)
    rows = [
        OverviewJob(job, streaks.get(job.name, 0) if _failed(job) else 0, _first_line(job))
        for job in shown
    ]
    return Overview(rows, len(jobs), page, pages)


def _summary(
    settings: Settings, catalog: Catalog, store: Store, clock: Clock | None = None
) -> Report:
    now, (snapshot, running) = store.summary_snapshot()
    rows = snapshot.schedules
    for name, row in rows.items():
        last = LastAttempt.recorded(row)
        if last is not None:
            snapshot.last_runs[name] = last
        if row.last_success_at is not None:
            snapshot.last_success[name] = row.last_success_at
    for run in running:  # oldest first: the newest running attempt is the last one
        snapshot.running.setdefault(run.job_name, []).append(run)
        snapshot.last_runs[run.job_name] = LastAttempt.of(run)
        if run.lease_expires_at is not None and run.lease_expires_at < now:
            snapshot.expired_runs.setdefault(run.job_name, []).append(run)
    return report_from(settings, catalog, snapshot)


def _failed(job: JobReport) -> bool:
    return job.last_run is not None and job.last_run.outcome in FAILED_OUTCOMES


def _first_line(job: JobReport) -> str | None:
    if job.last_run is None or not job.last_run.error or job.last_run.outcome == "succeeded":
        return None
    line = next((text for text in job.last_run.error.splitlines() if text.strip()), "")
    line = line.strip()
    return line if len(line) <= ERROR_LINE else line[: ERROR_LINE - 1] + "…"
