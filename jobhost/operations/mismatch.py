"""Why what runs differs from what is declared or expected: the report's ``mismatch`` reasons,
each with a stable ``code`` (what scripts match on) and a detail for people.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TypeVar

from jobhost.catalog import EffectiveTrigger, JobSpec, Problem
from jobhost.catalog.stored import StoredFacts
from jobhost.config import Settings, format_duration
from jobhost.operations.timefmt import duration_text, short_utc
from jobhost.records import DesiredSchedule, RunRecord, ScheduleChange, ScheduleRow, diff_schedules
from jobhost.rules import desired_schedules
from jobhost.triggers import CronSchedule, Schedule, cron_schedule
from jobhost.triggers.search import newest_at_or_before

__all__ = [
    "JobFacts",
    "Mismatch",
    "job_mismatches",
    "per_spec",
    "spec_facts",
    "store_changes",
    "trigger_last_due",
]


@dataclass(frozen=True)
class Mismatch:
    code: str
    detail: str

    def text(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class JobFacts:
    name: str
    spec: JobSpec | None
    row: ScheduleRow | None
    problems: Sequence[Problem]
    next_fire: datetime | None
    last_success: datetime | None
    expired_runs: Sequence[RunRecord]
    deleted: tuple[str, datetime] | None = None
    """(who, when) a runtime job was removed through the API; None for any other job."""
    stored: StoredFacts | None = None
    """The declaration the job's row holds, read without rebuilding the job (``spec`` None)."""

    @property
    def enabled(self) -> bool:
        if self.spec is not None:
            return self.spec.enabled
        if self.stored is not None:
            return self.stored.enabled
        return self.row is not None and self.row.enabled

    @property
    def paused(self) -> bool:
        return self.row is not None and self.row.paused


def job_mismatches(
    facts: JobFacts,
    settings: Settings,
    now: datetime,
    live_hosts: int,
    store_changes: Mapping[str, ScheduleChange],
) -> list[Mismatch]:
    """In a fixed order (configuration first); ``store_changes`` is of the whole catalog."""
    found: list[Mismatch | None] = []
    spec, row = facts.spec, facts.row
    declared = _declared(facts, settings)
    if declared is not None:
        found += declared.fixed
        if spec is not None and row is not None:
            found.append(_store_differs(spec, row, store_changes))
    elif facts.problems:
        lines = "; ".join(problem.message for problem in facts.problems)
        found.append(Mismatch("invalid", f"declared with problems, so no host runs it: {lines}"))
    elif facts.deleted is not None:
        who, when = facts.deleted
        found.append(Mismatch("orphaned", f"deleted through the API by {who} at {short_utc(when)}"))
    elif row is not None and row.orphaned and row.trigger_source == "api":
        found.append(Mismatch("orphaned", "a runtime job deleted through the API"))
    elif row is not None:
        found.append(
            Mismatch("orphaned", "in the store, but no loaded module declares it any more")
        )
    if row is not None and row.paused:
        reason = f": {row.paused_reason}" if row.paused_reason else ""
        at = short_utc(row.paused_at)
        found.append(Mismatch("paused", f"by {row.paused_by or 'unknown'} at {at}{reason}"))
    enabled = declared is not None and declared.enabled
    if declared is not None and enabled and not facts.paused:
        # A paused job is meant not to fire: its next fire falling behind is no news.
        late = settings.poll_interval + timedelta(seconds=5)
        found += [
            _no_next_fire(facts),
            _next_fire_past(facts.next_fire, late, now),
            _overdue_of(facts, declared, now),
        ]
    found.append(_lease_expired(facts, now))
    if enabled and live_hosts == 0:
        found.append(_NO_LIVE_HOST)
    return [item for item in found if item is not None]


# A report asks every job at one instant: jobs sharing a cron expression and a zone share the
# answer (cron math is the report's costliest step at 10,000 jobs).
_LAST_DUE: dict[tuple[str | None, str, str, str, datetime], datetime | None] = {}
_LOOK_BACK = timedelta(days=400)
_DESIRED: dict[int, tuple[JobSpec, object, DesiredSchedule]] = {}
_DECLARED: dict[int, tuple[JobSpec, object, _Declared]] = {}
# Entries each cache here holds before it is emptied.
_KEPT = 20_000
_T = TypeVar("_T")
# A catalog has a handful of graces and a summary may call thousands of jobs overdue.
_grace_text = lru_cache(maxsize=256)(format_duration)
# Every job says it when no host is alive: one value for all of them (a Mismatch is frozen).
_NO_LIVE_HOST = Mismatch("no-live-host", "no host is alive to fire it")


@dataclass(frozen=True, slots=True)
class _Declared:
    """What a job's mismatches take from its declaration and the settings alone."""

    fixed: tuple[Mismatch, ...]
    """``override`` and ``not-configured``, those that apply."""
    enabled: bool
    trigger: EffectiveTrigger
    schedule: Callable[[datetime], Schedule | None]
    grace: timedelta


def _declared(facts: JobFacts, settings: Settings) -> _Declared | None:
    """Made once per spec and settings; None for a job nothing declares."""
    spec, stored = facts.spec, facts.stored
    if spec is None:
        if stored is None:
            return None
        return _declared_of(
            facts.name, stored, lambda _anchor: _stored_cron(stored.trigger), settings
        )
    return per_spec(
        _DECLARED,
        spec,
        lambda spec: _declared_of(spec.name, spec_facts(spec), spec.schedule, settings),
        settings,
    )


def per_spec(
    cache: dict[int, tuple[JobSpec, object, _T]],
    spec: JobSpec,
    make: Callable[[JobSpec], _T],
    also: object = None,
) -> _T:
    """``make(spec)`` once per spec (and ``also``): specs outlive the many reports made of them."""
    found = cache.get(id(spec))
    # The spec and ``also`` are kept: neither id is reused while the entry lives.
    if found is None or found[0] is not spec or found[1] is not also:
        if len(cache) >= _KEPT:
            cache.clear()
        found = cache[id(spec)] = (spec, also, make(spec))
    return found[2]


def _declared_of(
    name: str,
    stored: StoredFacts,
    schedule: Callable[[datetime], Schedule | None],
    settings: Settings,
) -> _Declared:
    fixed: list[Mismatch] = []
    changes: list[str] = []
    if stored.overridden:
        trigger, declared = stored.trigger, stored.declared
        if _parts(trigger) != _parts(declared):
            changes.append(f"{trigger.describe()} instead of {declared.describe()}")
        enabled = stored.override_enabled
        if enabled is not None and enabled != stored.declared_enabled:
            changes.append("enabled" if enabled else "disabled")
    if changes:
        fixed.append(Mismatch("override", f'[jobs."{name}"] in force: {", ".join(changes)}'))
    source = stored.configuration_source
    if not stored.enabled and source is not None and source not in settings.modules:
        fixed.append(
            Mismatch(
                "not-configured",
                f"[modules.{source}] is absent from the settings; the module keeps the job "
                "disabled",
            )
        )
    grace = stored.overdue_after if stored.overdue_after is not None else settings.overdue_grace
    return _Declared(tuple(fixed), stored.enabled, stored.trigger, schedule, grace)


def spec_facts(spec: JobSpec) -> StoredFacts:
    declaration, override = spec.declaration, spec.override
    return StoredFacts(
        enabled=spec.enabled,
        group=spec.concurrency_group,
        trigger=spec.trigger,
        declared=spec.declared,
        overridden=override is not None,
        override_enabled=override.enabled if override is not None else None,
        description=declaration.description,
        critical=declaration.critical,
        declared_enabled=declaration.enabled,
        configuration_source=declaration.configuration_source,
        overdue_after=declaration.overdue_after,
        lease=declaration.lease,
    )


@lru_cache(maxsize=_KEPT)
def _stored_cron(trigger: EffectiveTrigger) -> CronSchedule | None:
    if trigger.kind != "cron" or trigger.expression is None:
        return None
    return cron_schedule(
        trigger.expression, trigger.timezone, dst_gap=trigger.dst_gap, dst_repeat=trigger.dst_repeat
    )


def _parts(trigger: EffectiveTrigger) -> tuple[str | None, str | None, str]:
    return trigger.kind, trigger.expression, trigger.timezone


def store_changes(
    specs: Mapping[str, JobSpec], rows: Mapping[str, ScheduleRow]
) -> dict[str, ScheduleChange]:
    stored = [rows[name] for name in specs if name in rows]
    desired = [per_spec(_DESIRED, specs[row.job_name], _desired) for row in stored]
    return {change.job_name: change for change in diff_schedules(stored, desired).changed}


def _desired(spec: JobSpec) -> DesiredSchedule:
    return desired_schedules({spec.name: spec}, with_declarations=False)[0]


def _store_differs(
    spec: JobSpec, row: ScheduleRow, changes: Mapping[str, ScheduleChange]
) -> Mismatch | None:
    change = changes.get(spec.name)
    if change is None:
        return None
    before = "orphaned" if row.orphaned else change.before
    return Mismatch(
        "store-differs",
        f"the store has {before}, the catalog {change.after}; a host started with this "
        "catalog applies it (see `jobhost plan`)",
    )


def _no_next_fire(facts: JobFacts) -> Mismatch | None:
    if facts.next_fire is not None or (facts.row is not None and facts.row.orphaned):
        return None
    return Mismatch("no-next-fire", "enabled, but nothing schedules its next fire")


def _next_fire_past(next_fire: datetime | None, late: timedelta, now: datetime) -> Mismatch | None:
    # ``late``: how far behind a next fire may be before nothing fires it (a poll and a margin).
    if next_fire is None or next_fire >= now - late:
        return None
    return Mismatch(
        "next-fire-past",
        f"next fire {short_utc(next_fire)} is {duration_text(now - next_fire)} in the past: "
        "nothing is firing it",
    )


def _overdue_of(facts: JobFacts, declared: _Declared, now: datetime) -> Mismatch | None:
    """Dead-man: an occurrence came due more than the grace ago and no success followed it
    (counted from the last occurrence due: a weekday job is not overdue on Sunday)."""
    row = facts.row
    if row is None:
        return None  # never scheduled: nothing was due yet
    since, grace, anchor = facts.last_success or row.created_at, declared.grace, row.interval_anchor
    if now - since <= grace:
        return None  # within grace whatever the trigger: no need to compute it
    due = trigger_last_due(
        declared.trigger, declared.schedule, anchor or row.created_at, now - grace
    )
    if due is None or due <= since:
        return None
    what = (
        f"last success {short_utc(facts.last_success)}"
        if facts.last_success is not None
        else f"no success since it was scheduled at {short_utc(row.created_at)}"
    )
    return Mismatch(
        "overdue",
        f"{what}; the occurrence due {short_utc(due)} has no success after it within its grace "
        f"{_grace_text(grace)}",
    )


def trigger_last_due(
    trigger: EffectiveTrigger,
    schedule_of: Callable[[datetime], Schedule | None],
    anchor: datetime,
    at: datetime,
) -> datetime | None:
    """Within 400 days; ``schedule_of(anchor)`` is asked only when the answer is not cached."""
    if trigger.kind == "interval" and trigger.interval is not None:
        return anchor + ((at - anchor) // trigger.interval) * trigger.interval
    if trigger.kind != "cron" or trigger.expression is None:
        return None
    # The daylight-saving policy belongs to the key: a skipped occurrence in the gap is not due.
    key = (trigger.expression, trigger.timezone, trigger.dst_gap, trigger.dst_repeat, at)
    if key in _LAST_DUE:
        return _LAST_DUE[key]
    schedule = schedule_of(anchor)
    if schedule is None:
        return None
    found = newest_at_or_before(schedule, at, keep=1, not_before=at - _LOOK_BACK)
    value = found[-1] if found else None
    if len(_LAST_DUE) >= _KEPT:
        _LAST_DUE.clear()
    _LAST_DUE[key] = value
    return value


def _lease_expired(facts: JobFacts, now: datetime) -> Mismatch | None:
    row = facts.row
    if (
        row is not None
        and row.lease_owner is not None
        and row.lease_expires_at is not None
        and row.lease_expires_at < now
    ):
        return Mismatch(
            "lease-expired",
            f"host {row.lease_owner} still holds the lease (run {row.lease_run_id or '-'}) "
            f"that expired at {short_utc(row.lease_expires_at)}",
        )
    if facts.expired_runs:
        run = facts.expired_runs[0]
        return Mismatch(
            "lease-expired",
            f"run {run.id} on host {run.host_id} is still running on a lease that expired "
            f"at {short_utc(run.lease_expires_at)}",
        )
    return None
