"""Why what runs differs from what is declared or expected: the report's ``mismatch`` reasons.

Each reason is a :class:`Mismatch` with a stable ``code`` (what scripts match on) and a detail
for people; the report prints ``code: detail``. Pure functions of the facts and ``now``.

Codes: ``override`` (a ``[jobs."name"]`` section changes the declaration), ``not-configured``
(disabled because its module's section is absent), ``paused``, ``orphaned`` (in the store, no
module declares it), ``invalid`` (declared, but with problems that keep it out of the catalog),
``store-differs`` (the store's schedule is not yet the catalog's), ``no-next-fire`` (enabled,
nothing scheduled), ``next-fire-past`` (the next fire is behind: nothing is firing it),
``overdue`` (dead-man: no success within its period plus grace), ``lease-expired`` (a lease
expired but is still held), ``no-live-host``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from jobhost.catalog import EffectiveTrigger, JobSpec, Problem
from jobhost.catalog.stored import StoredFacts
from jobhost.config import Settings, format_duration
from jobhost.operations.timefmt import duration_text, short_utc
from jobhost.records import DesiredSchedule, RunRecord, ScheduleChange, ScheduleRow, diff_schedules
from jobhost.triggers import CronSchedule, Schedule, cron_schedule
from jobhost.triggers.search import newest_at_or_before

__all__ = [
    "JobFacts",
    "Mismatch",
    "job_mismatches",
    "late_tolerance",
    "overdue_grace",
    "store_changes",
    "stored_mismatches",
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
    """Everything known about one job: the catalog's view, the store's, and its ledger."""

    name: str
    spec: JobSpec | None
    row: ScheduleRow | None
    problems: Sequence[Problem]
    next_fire: datetime | None
    last_success: datetime | None
    expired_runs: Sequence[RunRecord]
    deleted: tuple[str, datetime] | None = None
    """(who, when) a runtime job was removed through the API; None for any other job."""

    @property
    def declared(self) -> bool:
        return self.spec is not None

    @property
    def enabled(self) -> bool:
        if self.spec is not None:
            return self.spec.enabled
        return self.row is not None and self.row.enabled

    @property
    def paused(self) -> bool:
        return self.row is not None and self.row.paused


def job_mismatches(
    facts: JobFacts,
    settings: Settings,
    now: datetime,
    live_hosts: int,
    store_changes: Mapping[str, ScheduleChange] | None = None,
) -> list[Mismatch]:
    """Every reason that applies to the job, in a fixed order (configuration first).

    ``store_changes`` is :func:`store_changes` of the whole catalog, computed once for a report
    of many jobs; without it the job's own is computed.
    """
    found: list[Mismatch] = []
    spec, row = facts.spec, facts.row
    if spec is not None:
        judged = _judged(spec, settings)
        found += judged.fixed
        differs = _store_differs(spec, row, store_changes) if row is not None else None
        if differs is not None:
            found.append(differs)
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
    paused = row is not None and row.paused
    if row is not None and paused:
        found.append(_paused(row))
    if spec is not None and spec.enabled and not paused:
        # A paused job is meant not to fire: its next fire falling behind is no news.
        judged = _judged(spec, settings)
        late = (
            _no_next_fire(facts)
            if facts.next_fire is None
            else _next_fire_past(facts.next_fire, judged.late, now)
        )
        if late is not None:
            found.append(late)
        overdue = _overdue_of(facts, spec.trigger, spec.schedule, judged.grace, now)
        if overdue is not None:
            found.append(overdue)
    if facts.expired_runs or (row is not None and row.lease_owner is not None):
        expired = _lease_expired(facts, now)
        if expired is not None:
            found.append(expired)
    if spec is not None and spec.enabled and live_hosts == 0:
        found.append(_NO_LIVE_HOST)
    return found


def stored_mismatches(
    facts: JobFacts, stored: StoredFacts, settings: Settings, now: datetime, live_hosts: int
) -> list[Mismatch]:
    """:func:`job_mismatches` of a job the store's own catalog declares, from the declaration
    its row holds (``facts.spec`` None: no job is rebuilt, nothing compared with a catalog)."""
    row = facts.row
    found: list[Mismatch | None] = [
        _override_of(
            facts.name,
            stored.trigger,
            stored.declared,
            stored.override_enabled,
            stored.declared_enabled,
        )
        if stored.overridden
        else None,
        _not_configured_of(stored.enabled, stored.configuration_source, settings),
    ]
    if row is not None and row.paused:
        found.append(_paused(row))
    if stored.enabled and not facts.paused:
        grace = stored.overdue_after if stored.overdue_after is not None else settings.overdue_grace
        found += [
            _no_next_fire(facts),
            _next_fire_past(facts.next_fire, late_tolerance(settings), now),
            _overdue_of(facts, stored.trigger, _stored_schedule(stored.trigger), grace, now),
        ]
    found.append(_lease_expired(facts, now))
    if stored.enabled and live_hosts == 0:
        found.append(_NO_LIVE_HOST)
    return [item for item in found if item is not None]


def _stored_schedule(trigger: EffectiveTrigger) -> Callable[[datetime], Schedule | None]:
    """The cron schedule of a stored trigger, parsed once for every job that shares it."""

    def schedule(_anchor: datetime) -> Schedule | None:
        if trigger.kind != "cron" or trigger.expression is None:
            return None
        found = _CRONS.get(trigger)
        if found is None:
            if len(_CRONS) >= _LAST_DUE_KEPT:
                _CRONS.clear()
            found = _CRONS[trigger] = cron_schedule(
                trigger.expression,
                trigger.timezone,
                dst_gap=trigger.dst_gap,
                dst_repeat=trigger.dst_repeat,
            )
        return found

    return schedule


# A report asks every job at one instant: jobs sharing a cron expression and a zone share the
# answer (cron math is the report's costliest step at 10,000 jobs).
_LAST_DUE: dict[tuple[str | None, str, str, str, datetime], datetime | None] = {}
_LAST_DUE_KEPT = 20_000
_LOOK_BACK = timedelta(days=400)
_CRONS: dict[EffectiveTrigger, CronSchedule] = {}
_DESIRED: dict[int, tuple[JobSpec, DesiredSchedule]] = {}
_DESIRED_KEPT = 20_000
_JUDGED: dict[int, _Judged] = {}
# A catalog has a handful of graces and a summary may call thousands of jobs overdue.
_grace_text = lru_cache(maxsize=256)(format_duration)
_JUDGED_KEPT = 20_000
# Every job says it when no host is alive: one value for all of them (a Mismatch is frozen).
_NO_LIVE_HOST = Mismatch("no-live-host", "no host is alive to fire it")


def overdue_grace(spec: JobSpec, settings: Settings) -> timedelta:
    """The declaration's ``overdue_after``, or the host's ``overdue_grace``."""
    declared = spec.declaration.overdue_after
    return declared if declared is not None else settings.overdue_grace


def late_tolerance(settings: Settings) -> timedelta:
    """How far behind a next fire may be before nothing is firing it: a poll and a margin."""
    return settings.poll_interval + timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class _Judged:
    """What a declared job's mismatches take from its spec and the settings alone."""

    spec: JobSpec
    settings: Settings
    fixed: tuple[Mismatch, ...]
    """``override`` and ``not-configured``, those that apply."""
    grace: timedelta
    late: timedelta
    """:func:`late_tolerance` of the settings."""


def _judged(spec: JobSpec, settings: Settings) -> _Judged:
    """:class:`_Judged` of ``spec``, made once per job of a catalog that many reports read
    (the dashboard's summary asks every job every few seconds)."""
    found = _JUDGED.get(id(spec))
    # The spec and the settings are kept: neither id is reused while the entry lives.
    if found is None or found.spec is not spec or found.settings is not settings:
        if len(_JUDGED) >= _JUDGED_KEPT:
            _JUDGED.clear()
        fixed = (_override(spec), _not_configured(spec, settings))
        found = _JUDGED[id(spec)] = _Judged(
            spec,
            settings,
            tuple(item for item in fixed if item is not None),
            overdue_grace(spec, settings),
            late_tolerance(settings),
        )
    return found


def _override(spec: JobSpec) -> Mismatch | None:
    override = spec.override
    if override is None:
        return None
    return _override_of(
        spec.name, spec.trigger, spec.declared, override.enabled, spec.declaration.enabled
    )


def _override_of(
    name: str,
    trigger: EffectiveTrigger,
    declared: EffectiveTrigger,
    override_enabled: bool | None,
    declared_enabled: bool,
) -> Mismatch | None:
    changes: list[str] = []
    if _parts(trigger) != _parts(declared):
        changes.append(f"{trigger.describe()} instead of {declared.describe()}")
    if override_enabled is not None and override_enabled != declared_enabled:
        changes.append("enabled" if override_enabled else "disabled")
    if not changes:
        return None
    return Mismatch("override", f'[jobs."{name}"] in force: {", ".join(changes)}')


def _parts(trigger: EffectiveTrigger) -> tuple[str | None, str | None, str]:
    return trigger.kind, trigger.expression, trigger.timezone


def _not_configured(spec: JobSpec, settings: Settings) -> Mismatch | None:
    return _not_configured_of(spec.enabled, spec.declaration.configuration_source, settings)


def _not_configured_of(enabled: bool, source: str | None, settings: Settings) -> Mismatch | None:
    if enabled or source is None or source in settings.modules:
        return None
    return Mismatch(
        "not-configured",
        f"[modules.{source}] is absent from the settings; the module keeps the job disabled",
    )


def store_changes(
    specs: Mapping[str, JobSpec], rows: Mapping[str, ScheduleRow]
) -> dict[str, ScheduleChange]:
    """Each declared job whose stored schedule is not yet its catalog's, in one pass."""
    # Imported here: the firing loop's imports are not needed for anything else in a report.
    from jobhost.rules import desired_schedules

    stored = [rows[name] for name in specs if name in rows]
    desired = []
    for row in stored:
        spec = specs[row.job_name]
        # A catalog's specs outlive the reports made of them: each one's row is made once.
        found = _DESIRED.get(id(spec))
        if found is None or found[0] is not spec:  # the spec is kept: its id is not reused
            if len(_DESIRED) >= _DESIRED_KEPT:
                _DESIRED.clear()
            made = desired_schedules({spec.name: spec}, with_declarations=False)[0]
            found = _DESIRED[id(spec)] = (spec, made)
        desired.append(found[1])
    plan = diff_schedules(stored, desired)
    return {change.job_name: change for change in plan.changed}


def _store_differs(
    spec: JobSpec, row: ScheduleRow | None, known: Mapping[str, ScheduleChange] | None
) -> Mismatch | None:
    if row is None:
        return None
    changes = known if known is not None else store_changes({spec.name: spec}, {spec.name: row})
    change = changes.get(spec.name)
    if change is None:
        return None
    before = "orphaned" if row.orphaned else change.before
    return Mismatch(
        "store-differs",
        f"the store has {before}, the catalog {change.after}; a host started with this "
        "catalog applies it (see `jobhost plan`)",
    )


def _paused(row: ScheduleRow) -> Mismatch:
    who = row.paused_by or "unknown"
    reason = f": {row.paused_reason}" if row.paused_reason else ""
    return Mismatch("paused", f"by {who} at {short_utc(row.paused_at)}{reason}")


def _no_next_fire(facts: JobFacts) -> Mismatch | None:
    if facts.next_fire is not None or (facts.row is not None and facts.row.orphaned):
        return None
    return Mismatch("no-next-fire", "enabled, but nothing schedules its next fire")


def _next_fire_past(next_fire: datetime | None, late: timedelta, now: datetime) -> Mismatch | None:
    """``next-fire-past`` when ``next_fire`` is more than ``late`` behind ``now``."""
    if next_fire is None or next_fire >= now - late:
        return None
    return Mismatch(
        "next-fire-past",
        f"next fire {short_utc(next_fire)} is {duration_text(now - next_fire)} in the past: "
        "nothing is firing it",
    )


def _overdue_of(
    facts: JobFacts,
    trigger: EffectiveTrigger,
    schedule_of: Callable[[datetime], Schedule | None],
    grace: timedelta,
    now: datetime,
) -> Mismatch | None:
    """Dead-man: an occurrence came due more than the grace ago and no success followed it.

    Counted from the last occurrence that was due, not from the period: a weekday job is not
    overdue on Sunday, and a monthly job not on the 20th.
    """
    row = facts.row
    if row is None:
        return None  # never scheduled: nothing was due yet
    since = facts.last_success or row.created_at
    if now - since <= grace:
        return None  # within grace whatever the trigger: no need to compute it
    due = trigger_last_due(trigger, schedule_of, row.interval_anchor or row.created_at, now - grace)
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
    """The newest occurrence of ``trigger`` at or before ``at`` (within 400 days);
    ``schedule_of(anchor)`` is its schedule, asked only when the answer is not known yet.

    An interval's phase runs back from its anchor too: a job scheduled before its anchor was
    last moved had occurrences then.
    """
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
    if len(_LAST_DUE) >= _LAST_DUE_KEPT:
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
