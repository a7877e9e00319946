"""The schedule report's values: one entry per job, the live hosts, and their JSON.

Built by :mod:`jobhost.operations.report` (beside a catalog) and
:mod:`jobhost.operations.stored_report` (the store's own catalog, straight from its rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jobhost.catalog import EffectiveTrigger, Problem
from jobhost.operations.mismatch import Mismatch
from jobhost.operations.status import Status, Summary, summarise
from jobhost.operations.timefmt import iso_local, iso_utc
from jobhost.operations.uncollected import uncollected
from jobhost.records import GroupSummary, HostRecord, LastAttempt

__all__ = ["JobReport", "LastRun", "Report", "State", "TriggerView", "host_json"]

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
    def of(cls, run: LastAttempt) -> LastRun:
        # Positional: a summary makes one for each of 10,000 jobs.
        return cls(
            run.id,
            run.outcome,
            run.host_id,
            run.started_at,
            run.finished_at,
            run.duration_ms,
            run.error_message or run.error_type,
            run.backfill_id,
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

    def to_json(self, jobs: Sequence[JobReport] | None = None) -> dict[str, Any]:
        """The report as JSON; ``jobs`` (a filtered, sorted selection) instead of all of them,
        each job serialised once, with the collector paused
        (:mod:`jobhost.operations.uncollected`)."""
        summary = self.summary or summarise([job.status for job in self.jobs], self.hosts)
        with uncollected():
            return {
                "generated_at": iso_utc(self.generated_at),
                "summary": summary.to_json(),
                "hosts": [host_json(host) for host in self.hosts],
                "groups": [group.to_json() for group in self.groups],
                "jobs": [job.to_json() for job in (self.jobs if jobs is None else jobs)],
            }


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
