"""Changes to jobs: the schedules the code declares, the log of who changed what, job state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobhost.records.rows import ScheduleRow
from jobhost.triggers import Schedule


@dataclass(frozen=True)
class DesiredSchedule:
    """What the catalog says one job's schedule row should be.

    ``schedule_for(anchor)`` builds the trigger; the anchor matters only to interval jobs.
    """

    job_name: str
    module: str
    trigger_kind: str | None
    trigger_expression: str | None
    timezone: str
    trigger_source: str
    enabled: bool
    schedule_for: Callable[[datetime], Schedule | None] = field(compare=False)
    dst_policy: str | None = None
    """The daylight-saving policy where it is not the default (``dst_gap=skip``): part of the
    catalog's version, so a replica starting with another policy is a new version."""
    declaration: str | None = None
    """The effective declaration as JSON (:func:`jobhost.catalog.stored.declaration_text`):
    what read-only commands show without loading the module. Part of the catalog's version."""
    description: str = ""
    critical: bool = False
    job_source: str = "module"
    """``module`` (declared by a module) or ``runtime`` (created through the API)."""

    def describe(self) -> str:
        return describe_schedule(self)


@dataclass(frozen=True)
class ScheduleChange:
    job_name: str
    before: str
    after: str
    trigger_changed: bool


@dataclass
class SyncPlan:
    """The difference between the catalog and the store."""

    added: list[DesiredSchedule] = field(default_factory=list)
    changed: list[ScheduleChange] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)

    repaired: list[str] = field(default_factory=list)
    """Jobs whose stored next occurrence was one the trigger never produces; recomputed."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.orphaned)


def diff_schedules(rows: Sequence[ScheduleRow], desired: Sequence[DesiredSchedule]) -> SyncPlan:
    """What :func:`sync_schedules` would change, without changing it."""
    plan = SyncPlan()
    stored = {row.job_name: row for row in rows}
    for want in desired:
        row = stored.get(want.job_name)
        if row is None:
            plan.added.append(want)
        elif _differs(row, want):
            plan.changed.append(
                ScheduleChange(
                    want.job_name,
                    before=describe_schedule(row),
                    after=want.describe(),
                    trigger_changed=trigger_changed(row, want),
                )
            )
    names = {want.job_name for want in desired}
    # Runtime jobs' rows (source api) are written and orphaned by their own change path only:
    # a catalog never declared them, so a catalog's sync never orphans them.
    plan.orphaned = sorted(
        r.job_name
        for r in rows
        if r.job_name not in names and not r.orphaned and r.trigger_source != "api"
    )
    return plan


def _differs(row: ScheduleRow, want: DesiredSchedule) -> bool:
    return (
        row.orphaned
        or row.module != want.module
        or row.trigger_source != want.trigger_source
        or row.enabled != want.enabled
        or trigger_changed(row, want)
    )


def trigger_changed(row: ScheduleRow, want: DesiredSchedule) -> bool:
    return (row.trigger_kind, row.trigger_expression, row.timezone) != (
        want.trigger_kind,
        want.trigger_expression,
        want.timezone,
    )


def describe_schedule(schedule: ScheduleRow | DesiredSchedule) -> str:
    """A schedule's trigger as ``plan`` and the sync's report say it."""
    if schedule.trigger_kind == "cron":
        text = f"cron '{schedule.trigger_expression}' {schedule.timezone}"
    elif schedule.trigger_kind == "interval":
        text = f"every {schedule.trigger_expression}"
    else:
        text = "no trigger"
    return text if schedule.enabled else f"{text} (disabled)"


MAX_CHANGE_ID = 2**31 - 1
"""The largest id the change log's column holds (a 32-bit integer on PostgreSQL)."""


@dataclass(frozen=True, slots=True)
class RuntimeJobRow:
    name: str
    kind: str
    definition: dict[str, Any]
    version: int
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str


@dataclass(frozen=True, slots=True)
class JobChange:
    id: int
    at: datetime
    actor: str
    action: str
    job_name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None
    surface: str | None = None
    """``cli``, ``api`` or ``dashboard``; None for the host's own changes and older ones."""
    address: str | None = None
    """The HTTP client's address, as ``trusted_proxies`` decides it; None from the CLI."""


@dataclass(frozen=True, slots=True)
class ChangeSearch:
    """Each field narrows the search when set; ``before_id`` or ``after_id`` is the page's
    cursor."""

    actor: str = ""
    action: str = ""
    job: str | None = None
    module: str = ""
    since: datetime | None = None
    before_id: int | None = None
    after_id: int | None = None


@dataclass(frozen=True, slots=True)
class StateEntry:
    key: str
    value: str
    updated_at: datetime
    fencing_token: int


@dataclass(frozen=True, slots=True)
class LiveRun:
    id: str
    host_id: str | None
    started_at: datetime | None


class StateHeld(Exception):
    """A job's state cannot change now: a run of it is running."""

    def __init__(self, job_name: str, run: LiveRun) -> None:
        super().__init__(job_name, run)
        self.job_name = job_name
        self.run = run


@dataclass(frozen=True, slots=True)
class StateChange:
    """What a change found and did: ``known`` False when the store has no row for the job;
    ``changed`` False when the key already held that value (or, to delete, was absent)."""

    at: datetime
    before: str | None
    after: str | None
    known: bool = True
    changed: bool = True
