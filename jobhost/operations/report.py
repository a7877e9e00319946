"""The schedule report: one row per job, then the live hosts; the dashboard's overview.

A declared job no host has synced yet is shown from its declaration; a stored job no module
declares is shown from its row, ``orphaned``. ``last_run`` is the last real attempt: ``missed``
and ``skipped`` occurrences and queued runs only appear in ``recent_outcomes``.
"""

from __future__ import annotations

import gc
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, cast, get_args

from jobhost.catalog import Catalog, EffectiveTrigger, JobSpec, Problem
from jobhost.catalog.stored import StoredFacts, stored_facts
from jobhost.config import Settings
from jobhost.operations.jobs import stored_job
from jobhost.operations.mismatch import (
    JobFacts,
    Mismatch,
    job_mismatches,
    per_spec,
    spec_facts,
    store_changes,
)
from jobhost.operations.timefmt import iso_local, iso_utc
from jobhost.records import (
    FAILED,
    GroupSummary,
    HostRecord,
    LastAttempt,
    ScheduleChange,
    ScheduleRecord,
    ScheduleRow,
    StoreSnapshot,
)
from jobhost.store import Store

__all__ = [
    "SORTS",
    "STATUSES",
    "JobFilter",
    "JobReport",
    "Overview",
    "OverviewJob",
    "Report",
    "Sort",
    "State",
    "Status",
    "StoredJobs",
    "Summary",
    "build_report",
    "job_status",
    "next_fire_of",
    "overview_page",
    "read_summary",
    "report_from",
    "select_jobs",
    "state_of",
    "stored_jobs",
    "uncollected",
]


def build_report(
    settings: Settings,
    catalog: Catalog | None,
    store: Store,
    *,
    job: str | None = None,
    recent: bool = True,
    apart: bool = False,
) -> Report:
    """``catalog`` None: the store's own. With ``apart`` (a command, which has the store's
    connections to itself), PostgreSQL reads the catalog's ledger on connections of its own."""
    names = catalog.jobs if catalog is not None else ()
    with uncollected:
        snapshot = store.read_snapshot(names, store.clock, only=job, recent=recent, apart=apart)
        return report_from(settings, catalog, snapshot, job=job)


def report_from(
    settings: Settings,
    catalog: Catalog | None,
    snapshot: StoreSnapshot,
    *,
    job: str | None = None,
    compare: bool = True,
) -> Report:
    """With ``catalog`` None, each job is read from the declaration its row stores, rebuilt only
    when this version cannot read it."""
    specs, problems = (catalog.jobs, catalog.problems) if catalog is not None else ({}, [])
    changes = store_changes(specs, snapshot.schedules) if compare else {}
    by_job: dict[str, list[Problem]] = {}
    for problem in problems:
        if problem.job is not None:
            by_job.setdefault(problem.job, []).append(problem)
    jobs: list[JobReport] = []
    for name in sorted({*specs, *snapshot.schedules}):
        if job is not None and name != job:
            continue
        spec, read = specs.get(name), None
        row = snapshot.schedules[name] if catalog is None else None
        if row is not None and not row.orphaned:
            assert isinstance(row, ScheduleRecord), "the store's catalog is read from whole rows"
            read = None if row.declaration is None else _read(row.declaration)
            spec = None if read is not None else stored_job(settings, row)
        report = _job_report(
            snapshot, settings, changes, name, spec, problems=by_job.get(name), read=read
        )
        jobs.append(report)
    live = snapshot.live_hosts
    counts: dict[Status, int] = dict.fromkeys(STATUSES, 0)
    for entry in jobs:
        counts[entry.status] += 1
    lags = [h.schedule_lag_seconds for h in live if h.schedule_lag_seconds is not None]
    skews = [abs(h.clock_skew_seconds) for h in live]
    summary = Summary(
        jobs=len(jobs),
        by_status=counts,
        live_hosts=len(live),
        max_lag_seconds=round(max(lags), 3) if lags else None,
        max_clock_skew_seconds=round(max(skews), 3) if skews else None,
    )
    return Report(snapshot.now, live, jobs, summary, snapshot.groups)


def _job_report(
    snapshot: StoreSnapshot,
    settings: Settings,
    changes: Mapping[str, ScheduleChange],
    name: str,
    spec: JobSpec | None,
    *,
    problems: Sequence[Problem] | None,
    read: StoredFacts | None,
) -> JobReport:
    row = snapshot.schedules.get(name)
    deleted = snapshot.deleted.get(name) if spec is None else None
    facts = JobFacts(
        name=name,
        spec=spec,
        row=row,
        problems=problems or (),
        next_fire=next_fire_of(spec, row, snapshot.now),
        last_success=snapshot.last_success.get(name),
        expired_runs=snapshot.expired_runs.get(name, ()),
        deleted=(deleted.actor, deleted.at) if deleted is not None else None,
        stored=read,
    )
    declared: EffectiveTrigger | None
    if spec is not None:
        module, read = spec.module, per_spec(_SPECS, spec, spec_facts)
    else:
        assert row is not None, "an undeclared job in the report has a schedule row"
        module = row.module
    if read is not None:
        declared, effective = read.declared, read.trigger
        description, critical, group = read.description, read.critical, read.group
    else:
        assert row is not None, "an undeclared job in the report has a schedule row"
        description, critical, declared, group = "", False, None, None
        # Shown as stored, whatever this version makes of its kind and source.
        kind, source = cast(Any, row.trigger_kind), cast(Any, row.trigger_source)
        effective = EffectiveTrigger(kind, row.trigger_expression, None, row.timezone, source)
    group = group or (row.concurrency_group if row is not None else None)
    mismatches = job_mismatches(facts, settings, snapshot.now, len(snapshot.live_hosts), changes)
    running = snapshot.running.get(name, ())
    stuck = next((run for run in running if run.error_type == "Stuck"), None)
    if stuck is not None:
        mismatches.append(
            Mismatch(
                "stuck-code",
                f"run {stuck.id} on host {stuck.host_id} is stuck: its executor ignored "
                "cancellation and its thread still runs, holding its slot and lease",
            )
        )
    waiting_for = next(
        (g.status() for g in snapshot.groups if g.name == group and name in g.waiting_jobs), None
    )
    last = snapshot.last_runs.get(name)
    codes = [m.code for m in mismatches] if mismatches else ()
    state = state_of(facts)
    return JobReport(
        name=name,
        module=module,
        description=description,
        critical=critical,
        enabled=facts.enabled,
        paused=facts.paused,
        state=state,
        declared_trigger=declared,
        effective_trigger=effective,
        next_fire=facts.next_fire,
        last_run=last,
        recent_outcomes=snapshot.recent_outcomes.get(name, []),
        mismatches=mismatches,
        status=job_status(
            state, codes, last.outcome if last else None, bool(running), waiting_for is not None
        ),
        running=len(running),
        concurrency_group=group,
        waiting_for=waiting_for,
    )


def state_of(facts: JobFacts) -> State:
    if facts.spec is None and facts.stored is None and not facts.problems:
        return "orphaned"
    if facts.paused:
        return "paused"
    return "enabled" if facts.enabled else "disabled"


def next_fire_of(spec: JobSpec | None, row: ScheduleRow | None, now: datetime) -> datetime | None:
    """The store's next occurrence; for a job not (or no longer) scheduled, its trigger's."""
    if row is not None and not row.orphaned:
        return row.next_occurrence if row.enabled else None
    if spec is None or not spec.enabled:
        return None
    schedule = spec.schedule(now)
    return schedule.next_after(now) if schedule is not None else None


State = Literal["enabled", "disabled", "paused", "orphaned"]


@dataclass(frozen=True)
class JobReport:
    name: str
    module: str
    description: str
    critical: bool
    enabled: bool
    paused: bool
    state: State
    declared_trigger: EffectiveTrigger | None
    """None for a job no module declares: only its stored (effective) trigger is known."""
    effective_trigger: EffectiveTrigger
    next_fire: datetime | None
    last_run: LastAttempt | None
    recent_outcomes: list[str]
    mismatches: list[Mismatch]
    status: Status = "ok"
    running: int = 0
    concurrency_group: str | None = None
    waiting_for: str | None = None
    """``waiting for group warehouse, 2 of 2 busy`` while its work waits for a slot."""

    def has(self, code: str) -> Mismatch | None:
        return next((m for m in self.mismatches if m.code == code), None)

    def to_json(self) -> dict[str, Any]:
        zone = self.effective_trigger.timezone
        return {
            "name": self.name,
            "module": self.module,
            "description": self.description,
            "critical": self.critical,
            "enabled": self.enabled,
            "paused": self.paused,
            "state": self.state,
            "declared_trigger": (
                _trigger_json(self.declared_trigger) if self.declared_trigger is not None else None
            ),
            "effective_trigger": _trigger_json(self.effective_trigger, with_source=True),
            "next_fire_utc": iso_utc(self.next_fire),
            "next_fire_local": iso_local(self.next_fire, zone),
            "last_run": _last_run_json(self.last_run) if self.last_run is not None else None,
            "recent_outcomes": list(self.recent_outcomes),
            "mismatch": [m.text() for m in self.mismatches],
            "status": self.status,
            "concurrency_group": self.concurrency_group,
            "waiting_for": self.waiting_for,
        }


@dataclass(frozen=True)
class Report:
    generated_at: datetime
    hosts: list[HostRecord]
    """The live hosts, oldest first."""
    jobs: list[JobReport]
    summary: Summary
    """Of every job, before any filter narrowed ``jobs``."""
    groups: list[GroupSummary]
    """Every concurrency group: its limit, running runs and waiting work."""

    def to_json(self, jobs: Sequence[JobReport] | None = None) -> dict[str, Any]:
        """The report as JSON; ``jobs`` (a filtered, sorted selection) instead of all."""
        with uncollected:
            return {
                "generated_at": iso_utc(self.generated_at),
                "summary": asdict(self.summary),
                "hosts": [_host_json(host) for host in self.hosts],
                "groups": [group.to_json() for group in self.groups],
                "jobs": [job.to_json() for job in (self.jobs if jobs is None else jobs)],
            }


def _trigger_json(trigger: EffectiveTrigger, *, with_source: bool = False) -> dict[str, Any]:
    """``source`` only on the effective trigger; ``dst_policy`` only when not the default."""
    shown = {"kind": trigger.kind, "expression": trigger.expression, "timezone": trigger.timezone}
    if with_source:
        shown["source"] = trigger.source
    if (policy := trigger.dst_policy()) is not None:
        shown["dst_policy"] = policy
    return shown


def _last_run_json(run: LastAttempt) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "outcome": run.outcome,
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "duration_ms": run.duration_ms,
        "error": run.error_message or run.error_type,
        "backfill_id": run.backfill_id,
    }


def _host_json(host: HostRecord) -> dict[str, Any]:
    return {
        "id": host.id,
        "hostname": host.hostname,
        "pid": host.pid,
        "version": host.version,
        "started_at": iso_utc(host.started_at),
        "last_seen_at": iso_utc(host.last_seen_at),
        "clock_skew_seconds": round(host.clock_skew_seconds, 3),
        "catalog_version": host.catalog_version,
        "synced_at": iso_utc(host.synced_at),
        "schedule_lag_seconds": (
            round(host.schedule_lag_seconds, 3) if host.schedule_lag_seconds is not None else None
        ),
    }


# The stored declaration's fields, read without rebuilding the job: rebuilding each one was most
# of ``jobhost report`` at 10,000 jobs.
_SPECS: dict[int, tuple[JobSpec, object, StoredFacts]] = {}


@dataclass(frozen=True)
class StoredJobs:
    count: int
    critical: list[str]
    longest_lease: timedelta | None


def stored_jobs(
    settings: Settings,
    declared: Iterable[tuple[str, str | None]],
    rows_of: Callable[[list[str]], Mapping[str, ScheduleRecord]],
) -> StoredJobs:
    """Only the rows whose declaration this version cannot read are read whole (``rows_of``)."""
    read = {name: _read(text) if text is not None else None for name, text in declared}
    facts = {name: found for name, found in read.items() if found is not None}
    unread = [name for name, found in read.items() if found is None]
    for row in rows_of(unread).values() if unread else ():
        if not row.orphaned and (spec := stored_job(settings, row)) is not None:
            facts[row.job_name] = spec_facts(spec)
    critical = sorted(name for name, job in facts.items() if job.critical)
    leases = [job.lease for job in facts.values() if job.lease is not None]
    return StoredJobs(len(facts), critical, max(leases, default=None))


@lru_cache(maxsize=20_000)
def _read(text: str) -> StoredFacts | None:
    # Cached: a declaration holds no name, so many jobs share one text.
    try:
        return stored_facts(text)
    except (ValueError, KeyError, TypeError):
        return None


Status = Literal[
    "ok",
    "failing",
    "overdue",
    "behind",
    "stuck",
    "running",
    "waiting",
    "paused",
    "disabled",
    "orphaned",
    "invalid",
]
STATUSES: tuple[Status, ...] = get_args(Status)


def job_status(
    state: State,
    codes: Sequence[str],
    last_outcome: str | None,
    running: bool,
    waiting: bool = False,
) -> Status:
    """The first status that applies, in the order of the table in
    ``docs/operations/commands.md``."""
    if state != "enabled":
        return state
    if "invalid" in codes:
        return "invalid"
    if "lease-expired" in codes or "stuck-code" in codes:
        return "stuck"
    if running or last_outcome == "running":
        return "running"
    if waiting:
        return "waiting"
    if last_outcome in FAILED:
        return "failing"
    if "overdue" in codes:
        return "overdue"
    if "next-fire-past" in codes or "no-next-fire" in codes:
        return "behind"
    return "ok"


@dataclass(frozen=True)
class Summary:
    jobs: int
    by_status: dict[Status, int]
    live_hosts: int
    max_lag_seconds: float | None
    max_clock_skew_seconds: float | None


# A summary of 10,000 jobs makes a few hundred thousand objects, all kept or freed by reference
# counting: the collections they would start took half the summary's time, finding nothing.
class _Pause:
    """No automatic collection while any thread is inside; as it was once all have left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._inside += 1

    def __exit__(self, *_error: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._was_enabled:
                gc.enable()


uncollected = _Pause()


Sort = Literal["name", "next", "last", "state"]
SORTS: tuple[Sort, ...] = get_args(Sort)

# Most urgent first when sorting by state.
_URGENCY = {
    status: index
    for index, status in enumerate(
        (
            "stuck",
            "failing",
            "overdue",
            "behind",
            "invalid",
            "orphaned",
            "running",
            "waiting",
            "paused",
            "disabled",
            "ok",
        )
    )
}
assert set(_URGENCY) == set(STATUSES)
_FAILING = frozenset({"failed", "timed_out"})
_NEVER = datetime.min.replace(tzinfo=UTC)
_FOREVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class JobFilter:
    """``search`` matches name, module or description (any case); the others must all hold."""

    search: str = ""
    modules: Sequence[str] = ()
    statuses: Sequence[str] = ()
    failing: bool = False
    """Only jobs whose last attempt failed or timed out."""
    sort: Sort = "name"

    def keeps(self, job: JobReport) -> bool:
        needle = self.search.strip().lower()
        if needle and not any(
            needle in text.lower() for text in (job.name, job.module, job.description)
        ):
            return False
        if self.modules and job.module not in self.modules:
            return False
        if self.statuses and job.status not in self.statuses:
            return False
        return not self.failing or (job.last_run is not None and job.last_run.outcome in _FAILING)


def select_jobs(jobs: Sequence[JobReport], which: JobFilter) -> list[JobReport]:
    """Ties by name."""
    kept = sorted((job for job in jobs if which.keeps(job)), key=lambda job: job.name)
    if which.sort == "next":
        kept.sort(key=lambda job: job.next_fire or _FOREVER)
    elif which.sort == "last":
        kept.sort(key=_last_started, reverse=True)
    elif which.sort == "state":
        # Within a status, critical jobs first: a failing critical job is the first to fix.
        kept.sort(key=lambda job: (_URGENCY[job.status], not job.critical))
    return kept


def _last_started(job: JobReport) -> datetime:
    last = job.last_run
    if last is None:
        return _NEVER
    return last.started_at or last.finished_at or _NEVER


# The dashboard's overview reads no ledger rows but the failure streaks of its page's jobs.
_ERROR_LINE = 160


@dataclass(frozen=True)
class OverviewJob:
    job: JobReport
    streak: int
    """Failed attempts in a row; 0 unless the last attempt failed."""
    error_line: str | None
    """The first line of the last attempt's error, cut to :data:`_ERROR_LINE` characters."""


@dataclass(frozen=True)
class Overview:
    jobs: list[OverviewJob]
    matched: int
    page: int
    pages: int


def read_summary(settings: Settings, catalog: Catalog, store: Store) -> Report:
    with uncollected:
        snapshot = store.read_snapshot((), store.clock, recent=False, whole=False)
        return report_from(settings, catalog, snapshot)


def overview_page(
    store: Store, summary: Report, which: JobFilter, page: int, size: int
) -> Overview:
    """Page ``page`` (from 1, clamped); failure streaks are read for that page alone."""
    jobs = select_jobs(summary.jobs, which)
    pages = max(math.ceil(len(jobs) / size), 1)
    page = min(max(page, 1), pages)
    shown = jobs[(page - 1) * size : page * size]
    failing = [job.name for job in shown if _failed(job)]
    streaks = store.failure_rows(streaks_of=failing)[1].streaks if failing else {}
    rows = [
        OverviewJob(job, streaks.get(job.name, 0) if _failed(job) else 0, _first_line(job))
        for job in shown
    ]
    return Overview(rows, len(jobs), page, pages)


def _failed(job: JobReport) -> bool:
    return job.last_run is not None and job.last_run.outcome in FAILED


def _first_line(job: JobReport) -> str | None:
    last = job.last_run
    error = last.error_message or last.error_type if last is not None else None
    if last is None or not error or last.outcome == "succeeded":
        return None
    line = next((text for text in error.splitlines() if text.strip()), "").strip()
    return line if len(line) <= _ERROR_LINE else line[: _ERROR_LINE - 1] + "…"
