"""What each dashboard page shows, read from the store: plain data for the templates."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobhost.catalog import Catalog
from jobhost.clock import Clock
from jobhost.config import Settings
from jobhost.operations.jobs import JobStateView, read_state
from jobhost.operations.report import JobReport, Report, build_report
from jobhost.operations.runs import dropped_text, line_time
from jobhost.operations.timefmt import short_local, short_utc
from jobhost.records import (
    BackfillRecord,
    Dropped,
    HostRecord,
    JobChange,
    LogLine,
    RunRecord,
    StreakRange,
)
from jobhost.store import Store
from jobhost.web.console.chart import Chart, outcome_chart
from jobhost.web.console.timeline import Timeline, timeline

__all__ = [
    "HISTORY_PAGE",
    "HISTORY_PAGES",
    "Fire",
    "HostsView",
    "JobView",
    "LogEntry",
    "RunView",
    "hosts_view",
    "job_view",
    "run_view",
]

HISTORY_PAGE = 25
"""Runs on one page of a job's history."""
HISTORY_PAGES = 400
"""The deepest page of a job's history the page offers (older runs: `jobhost history`)."""
_PAGE_LOG_LINES = 5000
"""Lines of a run's log the page shows (the settings keep 1,000 by default)."""


@dataclass(frozen=True)
class Fire:
    utc: str
    local: str
    at: datetime


@dataclass(frozen=True)
class JobView:
    job: JobReport
    report: Report
    timeline: Timeline
    fires: list[Fire]
    failures: list[RunRecord]
    runs: list[RunRecord]
    """One page of the job's ledger, newest first, of the chosen outcome."""
    more: bool
    """Whether an older page follows."""
    chart: Chart
    actions: list[JobChange]
    """The job's newest changes from every surface (CLI, dashboard, API), newest first."""
    backfills: list[BackfillRecord] = field(default_factory=list)
    """The job's newest backfills, running ones with their progress."""
    state: JobStateView | None = None
    """What the job keeps between runs (``context.state``), by key."""
    streak: StreakRange | None = None
    """A failing job's streak, as the range its failed occurrences replay from."""


@dataclass(frozen=True)
class RunView:
    run: RunRecord
    attempts: list[RunRecord]
    zone: str
    log: list[LogEntry] = field(default_factory=list)
    """The run's log lines as the page shows them; a gap is a line of its own."""
    after: int = 0
    """The lines shown are those numbered above this (0: from the first)."""
    retry_of: RunRecord | None = None
    """The run this one retried (an operator's retry)."""

    @property
    def running(self) -> bool:
        """Still writing: the page's script tails the log (without script, it reloads)."""
        return self.run.outcome in {"running", "pending"}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of a run's log on the page: its number, time, level and text (or a gap)."""

    seq: int | None
    time: str
    level: str
    message: str
    at: datetime | None = None
    """When the line was written (none for a gap): the page shows it in the zone picked."""


@dataclass(frozen=True)
class HostsView:
    now: datetime
    hosts: list[tuple[HostRecord, bool]]
    """Every host the store knows, newest first, with whether it is alive."""


def job_view(
    settings: Settings,
    catalog: Catalog,
    store: Store,
    name: str,
    *,
    span: timedelta,
    slices: int,
    outcome: str | None = None,
    page: int = 1,
    clock: Clock | None = None,
) -> JobView | None:
    """The job page: timeline and chart over the ``span`` before now (the chart in ``slices``
    bars), and page ``page`` of its history, of ``outcome`` when given."""
    report = build_report(settings, catalog, store, job=name, clock=clock)
    if not report.jobs:
        return None
    job = report.jobs[0]
    now = report.generated_at
    zone = job.effective_trigger.timezone
    rows = store.job_page(
        name,
        now - span,
        now,
        slices=slices,
        history=HISTORY_PAGE + 1,
        outcome=outcome,
        offset=(page - 1) * HISTORY_PAGE,
        now=now,
    )
    return JobView(
        job=job,
        report=report,
        timeline=timeline(rows.window, now=now, span=span, zone=zone),
        fires=_next_fires(catalog, job, now),
        failures=rows.failures,
        runs=rows.history[:HISTORY_PAGE],
        more=len(rows.history) > HISTORY_PAGE and page < HISTORY_PAGES,
        chart=outcome_chart(rows.counts, now - span, now),
        actions=rows.changes,
        backfills=rows.backfills,
        state=read_state(store, name),
        # Read only for a failing job: a walk back through its newest attempts.
        streak=store.streak_range(name) if job.status == "failing" else None,
    )


def run_view(store: Store, catalog: Catalog, run_id: str, *, after: int = 0) -> RunView | None:
    """The run, its attempts and its log lines numbered above ``after`` (the page's script
    asks for the lines after the last one it shows, to tail a running run)."""
    page = store.run_page(run_id, after=after, lines=_PAGE_LOG_LINES)
    if page is None:
        return None
    spec = catalog.jobs.get(page.run.job_name)
    zone = spec.trigger.timezone if spec is not None else "UTC"
    entries = [_log_entry(entry) for entry in page.lines]
    return RunView(page.run, page.attempts, zone, entries, after, page.retry_of)


def _log_entry(entry: LogLine | Dropped) -> LogEntry:
    if isinstance(entry, Dropped):
        return LogEntry(None, "", "dropped", dropped_text(entry))
    return LogEntry(entry.seq, line_time(entry.at), entry.level, entry.message, entry.at)


def hosts_view(store: Store, clock: Clock | None = None) -> HostsView:
    now, hosts = store.all_hosts()
    ordered = sorted(hosts, key=lambda host: host.last_seen_at, reverse=True)
    return HostsView(now, [(host, host.alive(now)) for host in ordered])


def _next_fires(catalog: Catalog, job: JobReport, now: datetime) -> list[Fire]:
    """The next ten fires: an interval job's from its stored next fire (its phase), a cron
    job's from its expression."""
    spec = catalog.jobs.get(job.name)
    if spec is None or not spec.enabled or job.paused:
        return []
    zone = job.effective_trigger.timezone
    interval = spec.trigger.interval if spec.trigger.kind == "interval" else None
    if interval is not None and job.next_fire is not None:
        fires = [job.next_fire + index * interval for index in range(10)]
    else:
        schedule = spec.schedule(now)
        fires = schedule.iter_after(now, 10) if schedule is not None else []
    return [Fire(short_utc(at), short_local(at, zone), at) for at in fires]
