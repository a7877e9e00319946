"""A job's report entry straight from its schedule row: the store's catalog, not rebuilt.

A read-only command reports the jobs the store holds. Rebuilding each one (a validated
declaration, its policies, an override model, a parsed cron) only to ask it for a dozen fields
was most of ``jobhost report`` at 10,000 jobs, so :func:`stored_entry` reads those fields from
the declaration the row stores (:func:`~jobhost.catalog.stored.stored_facts`) and computes the
same mismatches, state and status as the full path (:func:`~jobhost.operations.mismatch.
stored_mismatches`). A row whose declaration this version cannot read, and an orphaned row, are
left to the full path (:func:`~jobhost.operations.report.report_from`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobhost.catalog.stored import StoredFacts, stored_facts
from jobhost.config import Settings
from jobhost.operations.mismatch import JobFacts, Mismatch, stored_mismatches
from jobhost.operations.report_model import JobReport, LastRun, State, TriggerView
from jobhost.operations.status import job_status
from jobhost.operations.stored import stored_job
from jobhost.records import GroupSummary, RunRecord, ScheduleRecord, StoreSnapshot

__all__ = ["StoredJobs", "group_wait", "job_entry", "stored_entry", "stored_jobs", "stuck_code"]

_READ: dict[str, tuple[StoredFacts, TriggerView, TriggerView]] = {}
_READ_KEPT = 20_000


def stored_entry(
    row: ScheduleRecord, snapshot: StoreSnapshot, settings: Settings, live_hosts: int
) -> JobReport | None:
    """The report entry of the job ``row`` declares, or None for the full path to build."""
    if row.orphaned or row.declaration is None:
        return None
    read = _read(row.declaration)
    if read is None:
        return None  # written by another version: the full path reads its columns
    stored, declared, effective = read
    name, now = row.job_name, snapshot.now
    facts = JobFacts(
        name=name,
        spec=None,
        row=row,
        problems=(),
        next_fire=row.next_occurrence if row.enabled else None,
        last_success=snapshot.last_success.get(name),
        expired_runs=snapshot.expired_runs.get(name, ()),
    )
    state: State = "paused" if row.paused else "enabled" if stored.enabled else "disabled"
    return job_entry(
        snapshot,
        name,
        module=row.module,
        description=stored.description,
        critical=stored.critical,
        enabled=stored.enabled,
        paused=row.paused,
        state=state,
        declared=declared,
        effective=effective,
        next_fire=facts.next_fire,
        mismatches=stored_mismatches(facts, stored, settings, now, live_hosts),
        group=stored.group or row.concurrency_group,
    )


def job_entry(
    snapshot: StoreSnapshot,
    name: str,
    *,
    module: str,
    description: str,
    critical: bool,
    enabled: bool,
    paused: bool,
    state: State,
    declared: TriggerView | None,
    effective: TriggerView,
    next_fire: datetime | None,
    mismatches: list[Mismatch],
    group: str | None,
) -> JobReport:
    """A job's report entry from what its declaration says and what the snapshot holds of its
    runs: the last attempt, the running ones (stuck code among them), its group's wait and its
    status. Both paths, the store's catalog and a loaded one, end here."""
    running = snapshot.running.get(name, ())
    if running:
        stuck = stuck_code(running)
        if stuck is not None:
            mismatches.append(stuck)
    waiting_for = group_wait(snapshot.groups, group, name) if group is not None else None
    last = snapshot.last_runs.get(name)
    codes = [m.code for m in mismatches] if mismatches else ()
    return JobReport(
        name=name,
        module=module,
        description=description,
        critical=critical,
        enabled=enabled,
        paused=paused,
        state=state,
        declared_trigger=declared,
        effective_trigger=effective,
        next_fire=next_fire,
        last_run=LastRun.of(last) if last is not None else None,
        recent_outcomes=snapshot.recent_outcomes.get(name, []),
        mismatches=mismatches,
        status=job_status(
            state, codes, last.outcome if last else None, bool(running), waiting_for is not None
        ),
        running=len(running),
        concurrency_group=group,
        waiting_for=waiting_for,
    )


@dataclass(frozen=True)
class StoredJobs:
    """What the health check asks of the store's whole catalog, read from the rows alone."""

    count: int
    """How many jobs the store's catalog holds (its live rows that describe a job)."""
    critical: list[str]
    longest_lease: timedelta | None
    """The longest lease a job declares; None when none declares one."""


def stored_jobs(
    settings: Settings,
    declared: Iterable[tuple[str, str | None]],
    rows_of: Callable[[list[str]], Mapping[str, ScheduleRecord]],
) -> StoredJobs:
    """:class:`StoredJobs` of the live jobs ``declared`` names (with the declaration each row
    stores), each job as :func:`stored_entry` reads it. Only the rows whose declaration this
    version cannot read are read whole (``rows_of``), to be judged from their columns."""
    count, critical, leases, unread = 0, [], [], []
    for name, declaration in declared:
        read = _read(declaration) if declaration is not None else None
        if read is None:
            unread.append(name)
            continue
        count += 1
        if read[0].critical:
            critical.append(name)
        if read[0].lease is not None:
            leases.append(read[0].lease)
    for row in rows_of(unread).values() if unread else ():
        spec = None if row.orphaned else stored_job(settings, row)
        if spec is None:
            continue
        count += 1
        if spec.declaration.critical:
            critical.append(row.job_name)
        if spec.declaration.lease is not None:
            leases.append(spec.declaration.lease)
    return StoredJobs(count, sorted(critical), max(leases) if leases else None)


def _read(text: str) -> tuple[StoredFacts, TriggerView, TriggerView] | None:
    """The declaration ``text`` and its two triggers as the report shows them, read once for
    every job that stores the same text (a declaration holds no name: many jobs share one)."""
    found = _READ.get(text)
    if found is None:
        try:
            stored = stored_facts(text)
        except (ValueError, KeyError, TypeError):
            return None
        if len(_READ) >= _READ_KEPT:
            _READ.clear()
        found = _READ[text] = (
            stored,
            TriggerView.of(stored.declared, with_source=False),
            TriggerView.of(stored.trigger, with_source=True),
        )
    return found


def stuck_code(running: Sequence[RunRecord]) -> Mismatch | None:
    """``stuck-code`` when one of the job's running runs is held by code that ignored its
    cancellation."""
    stuck = next((run for run in running if run.error_type == "Stuck"), None)
    if stuck is None:
        return None
    return Mismatch(
        "stuck-code",
        f"run {stuck.id} on host {stuck.host_id} is stuck: its executor ignored "
        "cancellation and its thread still runs, holding its slot and lease",
    )


def group_wait(groups: Sequence[GroupSummary], group: str | None, name: str) -> str | None:
    """``waiting for group warehouse, 2 of 2 busy`` while the job's work waits for a slot."""
    if group is None:
        return None
    return next((g.status() for g in groups if g.name == group and name in g.waiting_jobs), None)
