"""The schedule report: one row per job, then the live hosts, as typed values and as JSON.

Jobs come from the catalog and from the store: a declared job that no host has synced yet is
shown from its declaration (its next fire computed from its trigger); a stored job no module
declares is shown from its schedule row, ``orphaned``. ``last_run`` is the last real attempt
(``missed`` and ``skipped`` occurrences and queued retries are not attempts, they appear in
``recent_outcomes`` and ``jobhost history``); ``recent_outcomes`` holds the last five ledger
outcomes, newest first, ``missed`` and ``skipped`` included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jobhost.catalog import Catalog, EffectiveTrigger, JobSpec, Problem
from jobhost.config import Settings
from jobhost.operations.mismatch import JobFacts, Mismatch, job_mismatches, store_changes
from jobhost.operations.snapshot import StoreSnapshot, read_snapshot
from jobhost.operations.status import Status, Summary, job_status, summarise
from jobhost.operations.stored import catalog_of
from jobhost.operations.timefmt import iso_local, iso_utc
from jobhost.store import Clock, Engine, HostRecord, RunRecord, ScheduleRecord
from jobhost.store.group_limits import GroupSummary
from jobhost.store.registry import ScheduleChange

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
]

State = Literal["enabled", "disabled", "paused", "orphaned"]


@dataclass(frozen=True)
class TriggerView:
    """A trigger as the report shows it; ``source`` only on the effective one."""

    kind: str | None
    expression: str | None
    timezone: str
    source: str | None = None
    dst_policy: str | None = None
    """``dst_gap=skip, dst_repeat=both``: only a policy other than the default."""

    @classmethod
    def of(cls, trigger: EffectiveTrigger, *, with_source: bool) -> TriggerView:
        source = trigger.source if with_source else None
        policy = trigger.dst_policy()
        return cls(trigger.kind, trigger.expression, trigger.timezone, source, policy)

    def describe(self) -> str:
        if self.kind == "cron":
            zone = f"{self.timezone}; {self.dst_policy}" if self.dst_policy else self.timezone
            return f"cron '{self.expression}' ({zone})"
        if self.kind == "interval":
            return f"every {self.expression}"
        return "no trigger"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "expression": self.expression,
            "timezone": self.timezone,
        }
        if self.source is not None:
            data["source"] = self.source
        if self.dst_policy is not None:
            data["dst_policy"] = self.dst_policy
        return data


@dataclass(frozen=True)
class LastRun:
    """The job's last real attempt."""

    run_id: str
    outcome: str
    host: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    error: str | None
    backfill_id: str | None = None
    """The backfill the run replayed an occurrence for; None for any other run."""

    @classmethod
    def of(cls, run: RunRecord) -> LastRun:
        return cls(
            run_id=run.id,
            outcome=run.outcome,
            host=run.host_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
            duration_ms=run.duration_ms,
            error=run.error_message or run.error_type,
            backfill_id=run.backfill_id,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "started_at": iso_utc(self.started_at),
            "finished_at": iso_utc(self.finished_at),
            "duration_ms": self.duration_ms,
            "error": self.error,
            "backfill_id": self.backfill_id,
        }


@dataclass(frozen=True)
class JobReport:
    name: str
    module: str
    description: str
    critical: bool
    enabled: bool
    paused: bool
    state: State
    declared_trigger: TriggerView | None
    """None for a job no module declares: only its stored (effective) trigger is known."""
    effective_trigger: TriggerView
    next_fire: datetime | None
    last_run: LastRun | None
    recent_outcomes: list[str]
    mismatches: list[Mismatch]
    status: Status = "ok"
    running: int = 0
    """How many of its runs are running now."""
    concurrency_group: str | None = None
    waiting_for: str | None = None
    """``waiting for group warehouse, 2 of 2 busy`` while its work waits for a slot."""

    def has(self, code: str) -> Mismatch | None:
        """The mismatch with ``code``, if the job has it."""
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
                self.declared_trigger.to_json() if self.declared_trigger is not None else None
            ),
            "effective_trigger": self.effective_trigger.to_json(),
            "next_fire_utc": iso_utc(self.next_fire),
            "next_fire_local": iso_local(self.next_fire, zone),
            "last_run": self.last_run.to_json() if self.last_run is not None else None,
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
    problems: list[Problem]
    """The catalog's problems (the JSON leaves them to ``jobhost validate``)."""
    summary: Summary | None = None
    """Of every job, before any filter narrowed ``jobs``."""
    groups: list[GroupSummary] = field(default_factory=list)
    """Every concurrency group: its limit, running runs and waiting work."""

    def to_json(self) -> dict[str, Any]:
        summary = self.summary or summarise([job.status for job in self.jobs], self.hosts)
        return {
            "generated_at": iso_utc(self.generated_at),
            "summary": summary.to_json(),
            "hosts": [host_json(host) for host in self.hosts],
            "groups": [group.to_json() for group in self.groups],
            "jobs": [job.to_json() for job in self.jobs],
        }


def build_report(
    settings: Settings,
    catalog: Catalog | None,
    engine: Engine,
    *,
    job: str | None = None,
    clock: Clock | None = None,
) -> Report:
    """Read the store and put it beside the catalog; ``job`` narrows it to one job (and reads
    only that job's rows). With ``catalog`` None, the store's own catalog (the declarations
    its rows hold) is reported: no plugin is loaded and nothing is compared."""
    if catalog is None:
        snapshot = read_snapshot(engine, (), clock, only=job)
        stored = catalog_of(settings, snapshot.schedules.values())
        return report_from(settings, stored, snapshot, job=job, compare=False)
    snapshot = read_snapshot(engine, catalog.jobs, clock, only=job)
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
    now = snapshot.now
    live = snapshot.live_hosts
    invalid = {p.job for p in catalog.problems if p.job is not None} - set(catalog.jobs)
    names = sorted({*catalog.jobs, *snapshot.schedules})
    changes = store_changes(catalog.jobs, snapshot.schedules) if compare else {}
    jobs = [
        _job_report(name, catalog, snapshot, settings, live_hosts=len(live), changes=changes)
        for name in names
        if (job is None or name == job)
        and (name in catalog.jobs or name in snapshot.schedules or name in invalid)
    ]
    summary = summarise([item.status for item in jobs], live)
    return Report(
        generated_at=now,
        hosts=live,
        jobs=jobs,
        problems=list(catalog.problems),
        summary=summary,
        groups=snapshot.groups,
    )


def host_json(host: HostRecord) -> dict[str, Any]:
    """A host as the report's JSON shows it, with its clock minus the database's."""
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


def _job_report(
    name: str,
    catalog: Catalog,
    snapshot: StoreSnapshot,
    settings: Settings,
    *,
    live_hosts: int,
    changes: Mapping[str, ScheduleChange],
) -> JobReport:
    spec = catalog.jobs.get(name)
    row = snapshot.schedules.get(name)
    facts = JobFacts(
        name=name,
        spec=spec,
        row=row,
        problems=catalog.problems_for(name),
        next_fire=next_fire_of(spec, row, snapshot.now),
        last_success=snapshot.last_success.get(name),
        expired_runs=snapshot.expired_runs.get(name, []),
        deleted=_deleted(snapshot, name) if spec is None else None,
    )
    last = snapshot.last_runs.get(name)
    running = len(snapshot.running.get(name, []))
    if spec is not None:
        module, description, critical = (
            spec.module,
            spec.declaration.description,
            spec.declaration.critical,
        )
        declared: TriggerView | None = TriggerView.of(spec.declared, with_source=False)
        effective = TriggerView.of(spec.trigger, with_source=True)
    else:
        assert row is not None, "an undeclared job in the report has a schedule row"
        module, description, critical, declared = row.module, "", False, None
        effective = TriggerView(
            row.trigger_kind, row.trigger_expression, row.timezone, row.trigger_source
        )
    mismatches = job_mismatches(facts, settings, snapshot.now, live_hosts, changes)
    stuck = [r for r in snapshot.running.get(name, []) if r.error_type == "Stuck"]
    if stuck:
        mismatches.append(
            Mismatch(
                "stuck-code",
                f"run {stuck[0].id} on host {stuck[0].host_id} is stuck: its executor ignored "
                "cancellation and its thread still runs, holding its slot and lease",
            )
        )
    state = state_of(facts)
    codes = [m.code for m in mismatches]
    group = spec.concurrency_group if spec is not None else None
    group = group or (row.concurrency_group if row is not None else None)
    waiting_for = next(
        (g.status() for g in snapshot.groups if g.name == group and name in g.waiting_jobs),
        None,
    )
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
        last_run=LastRun.of(last) if last is not None else None,
        recent_outcomes=snapshot.recent_outcomes.get(name, []),
        mismatches=mismatches,
        status=job_status(
            state, codes, last.outcome if last else None, running > 0, waiting_for is not None
        ),
        running=running,
        concurrency_group=group,
        waiting_for=waiting_for,
    )


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


def next_fire_of(
    spec: JobSpec | None, row: ScheduleRecord | None, now: datetime
) -> datetime | None:
    """The store's next occurrence; for a job not (or no longer) scheduled, its trigger's."""
    if row is not None and not row.orphaned:
        return row.next_occurrence if row.enabled else None
    if spec is None or not spec.enabled:
        return None
    schedule = spec.schedule(now)
    return schedule.next_after(now) if schedule is not None else None
