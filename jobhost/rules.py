"""The firing rules: pure decisions about what runs, shared by the loop and operator commands.
No clock and no SQL here: the store reads and writes, this module decides.

A due row is planned by the trigger the STORE holds, not by this host's catalog: during a
rolling deploy the newest catalog to start wrote it, and every replica fires by it (see
``docs/operations/semantics.md``). The schedules built from stored triggers are kept, so a turn
parses nothing it has seen before.

Every occurrence that does not run is recorded with a reason, so "did it run last Tuesday?"
always has an answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobPolicies,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    TriggerSource,
    parse_duration,
)

from jobhost.catalog import JobSpec
from jobhost.catalog.stored import declaration_text
from jobhost.records import FAILED, DesiredSchedule, PlannedRow, SchedulePlan
from jobhost.triggers import CronSchedule, IntervalSchedule, Schedule, cron_schedule
from jobhost.triggers.search import GapCount, count_between, newest_at_or_before

__all__ = [
    "MAX_LISTED",
    "MODES",
    "FiringPlan",
    "FiringRules",
    "Gap",
    "NotRun",
    "catalog_version",
    "desired_schedules",
    "due_occurrences",
    "keep",
    "lease_for",
    "may_start",
    "plan_firing",
    "select_occurrences",
]


_CACHE_LIMIT = 4096


class FiringRules:
    """:class:`jobhost.store.claims.ClaimRules` for one host's catalog."""

    def __init__(self, jobs: Mapping[str, JobSpec], lease_duration: timedelta) -> None:
        self._jobs = jobs
        self._default_lease = lease_duration
        declared = [s.declaration.lease for s in jobs.values() if s.declaration.lease is not None]
        longest = max([*declared, lease_duration])
        self.implausible_lease = 4 * longest
        """A stored lease further ahead than this was not set by any renewal: it is corrupt."""
        self.problems: dict[str, str] = {}
        """Jobs set aside this turn, with the reason; the ticker reports and skips them."""
        self._crons: dict[tuple[str, str], CronSchedule] = {}
        self._intervals: dict[str, timedelta] = {}

    def knows(self, job_name: str) -> bool:
        return job_name in self._jobs

    def retry_policy(self, job_name: str) -> RetryPolicy | None:
        spec = self._jobs.get(job_name)
        return spec.declaration.retry if spec is not None else None

    def lease(self, job_name: str) -> timedelta:
        spec = self._jobs.get(job_name)
        return lease_for(spec.declaration if spec is not None else None, self._default_lease)

    def counts_live_runs(self, job_name: str) -> bool:
        return self._jobs[job_name].declaration.overlap is OverlapPolicy.ALLOW

    def may_start(self, job_name: str, live_runs: int, lease_live: bool) -> bool:
        return may_start(self._jobs[job_name].declaration, live_runs, lease_live)

    def plan(self, row: PlannedRow, now: datetime, blocked: bool) -> SchedulePlan | None:
        """What to do with the due row: run, record, move on; None leaves it untouched."""
        if not row.enabled or row.orphaned:
            return SchedulePlan(next_occurrence=row.next_occurrence, due_at=None)
        try:
            schedule = self.schedule_of(row)
        except (ValueError, LookupError) as error:
            self.problems[row.job_name] = f"stored trigger cannot be used: {error}"
            return None
        if schedule is None:
            return SchedulePlan(next_occurrence=None, due_at=None)
        first = row.next_occurrence
        if first is None:
            # Unreadable or missing: start again from the trigger, recording nothing unseen.
            upcoming = schedule.next_after(now)
            return SchedulePlan(next_occurrence=upcoming, due_at=upcoming)
        if row.paused:
            return self._paused(row, schedule, first, now)
        policy = self._jobs[row.job_name].declaration
        occurrences = due_occurrences(schedule, first, now, keep=keep(policy))
        plan = plan_firing(
            occurrences,
            now=now,
            policy=policy,
            paused=False,
            blocked=blocked,
            missed_through=row.missed_through,
        )
        next_occurrence = plan.next_occurrence or first
        due_at = next_occurrence
        if plan.run is None and next_occurrence <= now:
            # A catch-up backlog waiting for its running run: the run's end makes it due again.
            due_at = occurrences.following or next_occurrence
        return SchedulePlan(
            next_occurrence=next_occurrence,
            due_at=due_at,
            missed_through=plan.missed_through,
            run=plan.run,
            source=plan.source.value,
            not_run=[(n.occurrence, n.outcome, n.reason) for n in plan.not_run],
        )

    def schedule_of(self, row: PlannedRow) -> Schedule | None:
        """The schedule hosts fire ``row`` by: the catalog's trigger where the row holds it,
        else the row's own (another catalog version wrote it), with the row's interval phase."""
        spec = self._jobs[row.job_name]
        anchor = row.interval_anchor or row.next_occurrence
        trigger = spec.trigger
        if (row.trigger_kind, row.trigger_expression, row.timezone) == (
            trigger.kind,
            trigger.expression,
            trigger.timezone,
        ):
            # Read from the spec's own fields: this runs for every due row of every turn.
            if spec.cron is not None:
                return spec.cron
            if trigger.interval is not None:
                return IntervalSchedule(trigger.interval, anchor or row.created_at)
            return None
        # Another catalog version wrote this trigger: fire by it.
        if row.trigger_kind == "cron" and row.trigger_expression is not None:
            key = (row.trigger_expression, row.timezone)
            cron = self._crons.get(key)
            if cron is None:
                if len(self._crons) >= _CACHE_LIMIT:
                    self._crons.clear()
                cron = self._crons[key] = cron_schedule(*key)
            return cron
        if row.trigger_kind == "interval" and row.trigger_expression is not None:
            every = self._intervals.get(row.trigger_expression)
            if every is None:
                every = self._intervals[row.trigger_expression] = parse_duration(
                    row.trigger_expression
                )
            return IntervalSchedule(every, anchor or row.created_at)
        return None

    def _paused(
        self, row: PlannedRow, schedule: Schedule, place: datetime, now: datetime
    ) -> SchedulePlan:
        """Record what a paused job misses as it comes due; keep its place for the resume."""
        through = row.missed_through
        start: datetime | None = place
        if through is not None and through >= place:
            start = schedule.next_after(through)
        if start is None or start > now:
            return SchedulePlan(next_occurrence=place, due_at=start, missed_through=through)
        occurrences = due_occurrences(schedule, start, now)
        plan = plan_firing(
            occurrences,
            now=now,
            policy=self._jobs[row.job_name].declaration,
            paused=True,
            blocked=False,
            missed_through=None,
        )
        return SchedulePlan(
            next_occurrence=place,
            due_at=occurrences.following,
            missed_through=plan.missed_through or through,
            not_run=[(n.occurrence, n.outcome, n.reason) for n in plan.not_run],
        )


# A job's lease and overlap policy, with the host's defaults filled in.


def lease_for(declaration: BackgroundJobDeclaration | None, default: timedelta) -> timedelta:
    if declaration is None or declaration.lease is None:
        return default
    return declaration.lease


def may_start(declaration: BackgroundJobDeclaration, live_runs: int, lease_live: bool) -> bool:
    """Whether another run of the job may start now under its overlap policy."""
    if declaration.overlap is OverlapPolicy.FORBID:
        return not lease_live and live_runs == 0
    return live_runs < max(declaration.max_concurrent, 1)


# What to do with the occurrences of one job that have come due.

DEFAULT_MISFIRE_GRACE = timedelta(minutes=1)
"""How late an occurrence may start under the ``skip`` policy when the job names no grace."""

MAX_LISTED = 100
"""Most occurrences of one gap recorded one by one; the rest get one summary row."""

# Reasons recorded on runs that never started, as the history and the report show them.
REASON_DOWNTIME = "downtime"
REASON_PAUSED = "paused"
REASON_OVERLAP = "overlap"
REASON_CATCH_UP_BOUND = "catch-up bound"
REASON_GRACE = "misfire grace"
REASON_NONEXISTENT = "does not exist on this day"


def keep(policy: JobPolicies) -> int:
    """How many of the newest due occurrences ``policy`` may still run."""
    return max(policy.catch_up_limit, 1) if policy.misfire is MisfirePolicy.CATCH_UP else 1


@dataclass(frozen=True, slots=True)
class NotRun:
    """An occurrence recorded without an attempt: ``missed`` or ``skipped``, and why.

    A summary row stands for a whole gap: its occurrence is the gap's first one and its reason
    says how many it covers and up to when.
    """

    occurrence: datetime
    outcome: str
    reason: str


@dataclass(frozen=True, slots=True)
class Gap:
    """Due occurrences not listed one by one: ``count`` of them, from ``first`` on, all before
    ``before`` (the first listed occurrence after the gap)."""

    first: datetime
    before: datetime
    count: GapCount

    def summary(self, outcome: str, reason: str) -> NotRun:
        return NotRun(
            self.first,
            outcome,
            f"{reason}: {self.count.text()} occurrences from {self.first:%Y-%m-%dT%H:%M:%SZ} "
            f"to before {self.before:%Y-%m-%dT%H:%M:%SZ}, recorded as this one row",
        )


@dataclass(frozen=True, slots=True)
class FiringPlan:
    """The answer for one job in one tick; ``next_occurrence`` None leaves the stored value."""

    run: datetime | None = None
    source: TriggerSource = TriggerSource.SCHEDULE
    not_run: list[NotRun] = field(default_factory=list)
    next_occurrence: datetime | None = None
    missed_through: datetime | None = None


@dataclass(frozen=True, slots=True)
class DueOccurrences:
    """Occurrences from the stored next one up to ``now``, and the first one after them.

    ``due`` lists at most :data:`MAX_LISTED` of the oldest and the newest few the policy needs;
    ``gap``, when set, stands for every occurrence between those two runs of ``due``.
    """

    due: list[datetime]
    following: datetime | None
    gap: Gap | None = None
    nonexistent: list[datetime] = field(default_factory=list)
    """Occurrences up to ``following`` that ``dst_gap = "skip"`` drops: recorded missed."""


def due_occurrences(
    schedule: Schedule, first: datetime, now: datetime, *, keep: int = 1
) -> DueOccurrences:
    """``first`` and every later occurrence at or before ``now``, with bounded work.

    The oldest :data:`MAX_LISTED` are listed; past them the newest ``keep`` are found by jumping
    straight to ``now``, and the occurrences in between are counted, not enumerated, so a job
    paused or down for a year costs one bounded step.
    """
    if first > now:
        return DueOccurrences(due=[], following=first)
    head: list[datetime] = [first]
    current = schedule.next_after(first)
    while current is not None and current <= now and len(head) < MAX_LISTED:
        head.append(current)
        current = schedule.next_after(current)
    if current is None or current > now:
        found = DueOccurrences(due=head, following=current)
    else:
        found = _jump(schedule, head, current, now, keep)
    # Recorded when the occurrence before them is handled: no later turn looks at this window.
    nonexistent = schedule.skipped_between(first, found.following or now)
    return replace(found, nonexistent=nonexistent) if nonexistent else found


def _jump(
    schedule: Schedule, head: list[datetime], current: datetime, now: datetime, keep: int
) -> DueOccurrences:
    """Past the listed head: the newest ``keep`` due occurrences, and a count of the rest."""
    following = schedule.next_after(now)
    tail = newest_at_or_before(schedule, now, keep=keep, not_before=current)
    if not tail:
        return DueOccurrences(due=head, following=following)
    count = count_between(schedule, head[-1], tail[0])
    if count.count == 0:
        return DueOccurrences(due=head + tail, following=following)
    return DueOccurrences(
        due=head + tail,
        following=following,
        gap=Gap(first=current, before=tail[0], count=count),
    )


def plan_firing(
    occurrences: DueOccurrences,
    *,
    now: datetime,
    policy: JobPolicies,
    paused: bool,
    blocked: bool,
    missed_through: datetime | None,
) -> FiringPlan:
    """Decide which due occurrence runs now, and record every other one.

    ``blocked`` says an earlier run still holds the job (overlap). ``missed_through`` is the last
    occurrence already recorded missed while the job was paused: those are not recorded twice.
    """
    due = occurrences.due
    if not due:
        return FiringPlan()

    def with_gap(outcome: str, reason: str) -> list[NotRun]:
        return _rows(due, outcome, reason) + _gap_row(occurrences, outcome, reason)

    if paused:
        plan = FiringPlan(not_run=with_gap("missed", REASON_PAUSED), missed_through=due[-1])
    elif policy.misfire is MisfirePolicy.CATCH_UP:
        plan = _catch_up(occurrences, policy, blocked)
    elif blocked:
        plan = _advanced(occurrences, None, with_gap("skipped", REASON_OVERLAP), missed_through)
    elif policy.misfire is MisfirePolicy.SKIP:
        grace = policy.misfire_grace or DEFAULT_MISFIRE_GRACE
        too_late = [o for o in due if now - o > grace]
        in_time = [o for o in due if now - o <= grace]
        gap = occurrences.gap
        gap_late = gap is not None and now - gap.before > grace
        not_run = _rows(too_late, "missed", REASON_GRACE)
        not_run += _gap_row(occurrences, "missed", REASON_GRACE if gap_late else REASON_DOWNTIME)
        run: datetime | None = None
        if in_time:
            not_run += _rows(in_time[:-1], "missed", REASON_DOWNTIME)
            run = in_time[-1]
        plan = _advanced(occurrences, run, not_run, missed_through)
    else:
        # run_once: one run for everything that was missed, then on to the future.
        not_run = _rows(due[:-1], "missed", REASON_DOWNTIME)
        not_run += _gap_row(occurrences, "missed", REASON_DOWNTIME)
        plan = _advanced(occurrences, due[-1], not_run, missed_through)
    not_run = [*plan.not_run, *_rows(occurrences.nonexistent, "missed", REASON_NONEXISTENT)]
    if missed_through is not None:
        not_run = [row for row in not_run if row.occurrence > missed_through]
    return replace(plan, not_run=not_run)


def _advanced(
    occurrences: DueOccurrences,
    run: datetime | None,
    not_run: list[NotRun],
    missed_through: datetime | None,
) -> FiringPlan:
    following = occurrences.following
    keep_marker = (
        missed_through is not None and following is not None and following <= missed_through
    )
    several = len(occurrences.due) > 1 or occurrences.gap is not None
    return FiringPlan(
        run=run,
        source=TriggerSource.CATCH_UP if several else TriggerSource.SCHEDULE,
        not_run=not_run,
        next_occurrence=following,
        missed_through=missed_through if keep_marker else None,
    )


def _rows(items: list[datetime], outcome: str, reason: str) -> list[NotRun]:
    return [NotRun(occurrence, outcome, reason) for occurrence in items]


def _gap_row(occurrences: DueOccurrences, outcome: str, reason: str) -> list[NotRun]:
    gap = occurrences.gap
    return [] if gap is None else [gap.summary(outcome, reason)]


def _catch_up(occurrences: DueOccurrences, policy: JobPolicies, blocked: bool) -> FiringPlan:
    due = occurrences.due
    excess = max(len(due) - keep(policy), 0)
    dropped, kept = due[:excess], due[excess:]
    missed = _rows(dropped, "missed", REASON_CATCH_UP_BOUND)
    missed += _gap_row(occurrences, "missed", REASON_CATCH_UP_BOUND)
    if blocked:
        # Wait for the running run: the backlog keeps its place, only its bound is enforced.
        return FiringPlan(not_run=missed, next_occurrence=kept[0] if dropped else None)
    later = kept[1:]
    return FiringPlan(
        run=kept[0],
        source=TriggerSource.CATCH_UP if later or dropped else TriggerSource.SCHEDULE,
        not_run=missed,
        next_occurrence=later[0] if later else occurrences.following,
    )


# Which occurrences of a past range a backfill replays, by mode, from what the ledger says.
#
# ``missing`` replays every occurrence without a successful run: never run, recorded missed or
# skipped, or whose last attempt failed, timed out, was abandoned or cancelled. ``failed`` replays
# only those whose last attempt failed, timed out or was abandoned. ``all`` replays every one. An
# occurrence whose run is still pending or running is being handled: only ``all`` takes it.

MODES: Final = ("missing", "failed", "all")
_MISSING_OUTCOMES: Final = {*FAILED, "missed", "skipped", "cancelled"}


def select_occurrences(
    mode: str, occurrences: Iterable[datetime], last_outcomes: Mapping[datetime, str]
) -> list[datetime]:
    """The ``occurrences`` a backfill in ``mode`` replays, in their order; ``last_outcomes``
    maps an occurrence to its last attempt's outcome (absent: never ran)."""
    if mode == "all":
        return list(occurrences)
    if mode == "missing":
        return [o for o in occurrences if last_outcomes.get(o, "missed") in _MISSING_OUTCOMES]
    if mode == "failed":
        return [o for o in occurrences if last_outcomes.get(o) in FAILED]
    raise ValueError(f"unknown backfill mode {mode!r}: use one of {', '.join(MODES)}")


# What a catalog asks of the store: one desired schedule row per job, and a version for it.


def desired_schedules(
    jobs: Mapping[str, JobSpec], *, with_declarations: bool = True
) -> list[DesiredSchedule]:
    """One row per job, with its effective declaration unless ``with_declarations`` is false
    (a comparison of triggers only, which need not serialise 10,000 declarations)."""
    return [
        DesiredSchedule(
            job_name=spec.name,
            module=spec.module,
            trigger_kind=spec.trigger.kind,
            trigger_expression=spec.trigger.expression,
            timezone=spec.trigger.timezone,
            trigger_source=spec.trigger.source,
            enabled=spec.enabled,
            schedule_for=spec.schedule,
            dst_policy=spec.trigger.dst_policy() if spec.trigger.kind == "cron" else None,
            declaration=declaration_text(spec) if with_declarations else None,
            description=spec.declaration.description,
            critical=spec.declaration.critical,
            job_source="runtime" if spec.trigger.source == "api" else "module",
        )
        for spec in jobs.values()
    ]


def catalog_version(desired: list[DesiredSchedule]) -> str:
    """A short fingerprint of what a catalog asks the store for: equal catalogs, equal version.

    The whole effective declaration is part of it (policies, description, the daylight-saving
    policy): a host that starts with the version the store holds rewrites nothing."""
    digest = hashlib.sha256()
    for want in sorted(desired, key=lambda d: d.job_name):
        parts: list[object] = [
            want.job_name,
            want.module,
            want.trigger_kind,
            want.trigger_expression,
            want.timezone,
            want.trigger_source,
            want.enabled,
        ]
        if want.dst_policy:
            parts.append(want.dst_policy)
        if want.declaration is not None:
            parts.append(want.declaration)
        digest.update("\x1f".join(str(part) for part in parts).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()[:12]
