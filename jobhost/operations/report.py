"""The schedule report: one row per job, then the live hosts, as typed values and as JSON.

Jobs come from the catalog and from the store: a declared job that no host has synced yet is
shown from its declaration (its next fire computed from its trigger); a stored job no module
declares is shown from its schedule row, ``orphaned``. ``last_run`` is the last real attempt:
the newest running one, else the last one recorded finished, which the schedule row keeps
(``missed`` and ``skipped`` occurrences and queued runs are not attempts, they appear in
``recent_outcomes`` and ``jobhost history``); ``recent_outcomes`` holds the last five ledger
outcomes, newest first, ``missed`` and ``skipped`` included. Without a catalog the store's own
is reported, each job straight from its row (:mod:`jobhost.operations.stored_report`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobhost.catalog import Catalog, JobSpec, Problem
from jobhost.clock import Clock
from jobhost.config import Settings
from jobhost.operations.mismatch import JobFacts, job_mismatches, store_changes
from jobhost.operations.report_model import (
    JobReport,
    LastRun,
    Report,
    State,
    TriggerView,
    host_json,
)
from jobhost.operations.snapshot import StoreSnapshot
from jobhost.operations.status import summarise
from jobhost.operations.stored import stored_job
from jobhost.operations.stored_report import job_entry, stored_entry
from jobhost.operations.uncollected import uncollected
from jobhost.records import ScheduleChange, ScheduleRecord, ScheduleRow
from jobhost.store import Store

__all__ = [
    "JobReport",
    "LastRun",
    "Report",
    "State",
    "TriggerView",
    "build_report",
    "host_json",
    "next_fire_of",
    "report_from",
    "state_of",
    "stored_report",
]

_SHOWN: dict[int, _Shown] = {}
_SHOWN_KEPT = 20_000


def build_report(
    settings: Settings,
    catalog: Catalog | None,
    store: Store,
    *,
    job: str | None = None,
    clock: Clock | None = None,
    recent: bool = True,
    apart: bool = False,
) -> Report:
    """Read the store and put it beside the catalog; ``job`` narrows it to one job (and reads
    only that job's rows). With ``catalog`` None, the store's own catalog (the declarations
    its rows hold) is reported: no plugin is loaded and nothing is compared. Without
    ``recent``, each job's ``recent_outcomes`` is left empty, unread (the one-line-per-job
    text does not show them). With ``apart`` (a command, which has the store's connections to
    itself), PostgreSQL reads the whole catalog's ledger on connections of its own."""
    with uncollected():
        if catalog is None:
            snapshot = store.read_snapshot((), clock, only=job, recent=recent, apart=apart)
            return stored_report(settings, snapshot, job=job)
        snapshot = store.read_snapshot(catalog.jobs, clock, only=job, recent=recent, apart=apart)
        return report_from(settings, catalog, snapshot, job=job)


def report_from(
    settings: Settings,
    catalog: Catalog,
    snapshot: StoreSnapshot,
    *,
    job: str | None = None,
    compare: bool = True,
) -> Report:
    """The report of ``snapshot`` (pure: no store access). Without ``compare`` (``catalog`` is
    the store's own), no job's stored schedule is compared with its declaration."""
    live = snapshot.live_hosts
    invalid = {p.job for p in catalog.problems if p.job is not None} - set(catalog.jobs)
    names = sorted({*catalog.jobs, *snapshot.schedules})
    changes = store_changes(catalog.jobs, snapshot.schedules) if compare else {}
    problems = _problems_by_job(catalog.problems)
    jobs = [
        _job_report(
            name,
            catalog.jobs.get(name),
            problems.get(name, ()),
            snapshot,
            settings,
            live_hosts=len(live),
            changes=changes,
        )
        for name in names
        if (job is None or name == job)
        and (name in catalog.jobs or name in snapshot.schedules or name in invalid)
    ]
    return _report(snapshot, jobs, list(catalog.problems))


def _problems_by_job(problems: Sequence[Problem]) -> dict[str, list[Problem]]:
    """:meth:`Catalog.problems_for` of every job at once, in the catalog's order."""
    found: dict[str, list[Problem]] = {}
    for problem in problems:
        if problem.job is not None:
            found.setdefault(problem.job, []).append(problem)
    return found


def stored_report(settings: Settings, snapshot: StoreSnapshot, *, job: str | None = None) -> Report:
    """The report of the store's own catalog (the declarations its rows hold) in ``snapshot``
    (pure): what :func:`report_from` gives of it, each job read from its row, none rebuilt."""
    live_hosts = len(snapshot.live_hosts)
    jobs: list[JobReport] = []
    for name in sorted(snapshot.schedules):
        if job is not None and name != job:
            continue
        row = snapshot.schedules[name]
        assert isinstance(row, ScheduleRecord), "the store's own catalog is read from whole rows"
        entry = stored_entry(row, snapshot, settings, live_hosts)
        if entry is None:
            spec = None if row.orphaned else stored_job(settings, row)
            entry = _job_report(
                name, spec, (), snapshot, settings, live_hosts=live_hosts, changes={}
            )
        jobs.append(entry)
    return _report(snapshot, jobs, [])


def _report(snapshot: StoreSnapshot, jobs: list[JobReport], problems: list[Problem]) -> Report:
    live = snapshot.live_hosts
    return Report(
        generated_at=snapshot.now,
        hosts=live,
        jobs=jobs,
        problems=problems,
        summary=summarise([item.status for item in jobs], live),
        groups=snapshot.groups,
    )


def _job_report(
    name: str,
    spec: JobSpec | None,
    problems: Sequence[Problem],
    snapshot: StoreSnapshot,
    settings: Settings,
    *,
    live_hosts: int,
    changes: Mapping[str, ScheduleChange],
) -> JobReport:
    row = snapshot.schedules.get(name)
    facts = JobFacts(
        name=name,
        spec=spec,
        row=row,
        problems=problems,
        next_fire=next_fire_of(spec, row, snapshot.now),
        last_success=snapshot.last_success.get(name),
        expired_runs=snapshot.expired_runs.get(name, []),
        deleted=_deleted(snapshot, name) if spec is None else None,
    )
    if spec is not None:
        shown = _shown(spec)
        module, description, critical = shown.module, shown.description, shown.critical
        declared: TriggerView | None = shown.declared
        effective = shown.effective
        group = shown.group
    else:
        assert row is not None, "an undeclared job in the report has a schedule row"
        module, description, critical, declared = row.module, "", False, None
        effective = TriggerView(
            row.trigger_kind, row.trigger_expression, row.timezone, row.trigger_source
        )
        group = None
    return job_entry(
        snapshot,
        name,
        module=module,
        description=description,
        critical=critical,
        enabled=facts.enabled,
        paused=facts.paused,
        state=state_of(facts),
        declared=declared,
        effective=effective,
        next_fire=facts.next_fire,
        mismatches=job_mismatches(facts, settings, snapshot.now, live_hosts, changes),
        group=group or (row.concurrency_group if row is not None else None),
    )


@dataclass(frozen=True, slots=True)
class _Shown:
    """What the report shows of a declared job that its spec alone decides."""

    spec: JobSpec
    module: str
    description: str
    critical: bool
    declared: TriggerView
    effective: TriggerView
    group: str | None


def _shown(spec: JobSpec) -> _Shown:
    """:class:`_Shown` of ``spec``, made once per job of a catalog that many reports read (the
    dashboard's summary, every few seconds; the API's)."""
    found = _SHOWN.get(id(spec))
    if found is None or found.spec is not spec:  # the spec is kept: its id is not reused
        if len(_SHOWN) >= _SHOWN_KEPT:
            _SHOWN.clear()
        found = _SHOWN[id(spec)] = _Shown(
            spec,
            spec.module,
            spec.declaration.description,
            spec.declaration.critical,
            TriggerView.of(spec.declared, with_source=False),
            TriggerView.of(spec.trigger, with_source=True),
            spec.concurrency_group,
        )
    return found


def _deleted(snapshot: StoreSnapshot, name: str) -> tuple[str, datetime] | None:
    change = snapshot.deleted.get(name)
    return (change.actor, change.at) if change is not None else None


def state_of(facts: JobFacts) -> State:
    """The report's ``state`` of a job."""
    if facts.spec is None and not facts.problems:
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
