"""What to do with the occurrences of one job that have come due: pure, no database, no clock.

The firing loop enumerates the due occurrences, asks :func:`plan_firing` which one runs and what
happens to the rest, and writes the answer in one transaction. Every occurrence that does not run
is recorded with a reason, so "did it run last Tuesday?" always has an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from jobhost_contracts import MisfirePolicy, OverlapPolicy, TriggerSource

from jobhost.triggers import Schedule

__all__ = [
    "DEFAULT_MISFIRE_GRACE",
    "MAX_ENUMERATED",
    "DueOccurrences",
    "FiringPlan",
    "JobPolicy",
    "NotRun",
    "due_occurrences",
    "plan_firing",
]

DEFAULT_MISFIRE_GRACE = timedelta(minutes=1)
"""How late an occurrence may start under the ``skip`` policy when the job names no grace."""

MAX_ENUMERATED = 10_000
"""Most due occurrences listed one by one; beyond it, the rest are counted and logged."""

# Reasons recorded on runs that never started, as the history and the report show them.
REASON_DOWNTIME = "downtime"
REASON_PAUSED = "paused"
REASON_OVERLAP = "overlap"
REASON_CATCH_UP_BOUND = "catch-up bound"
REASON_GRACE = "misfire grace"
REASON_NONEXISTENT = "does not exist on this day"


@dataclass(frozen=True, slots=True)
class JobPolicy:
    """The policy fields of a declaration that decide firing."""

    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    catch_up_limit: int = 10
    misfire_grace: timedelta | None = None
    overlap: OverlapPolicy = OverlapPolicy.FORBID
    max_concurrent: int = 1


@dataclass(frozen=True, slots=True)
class NotRun:
    """An occurrence recorded without an attempt: ``missed`` or ``skipped``, and why."""

    occurrence: datetime
    outcome: str
    reason: str


@dataclass(frozen=True, slots=True)
class FiringPlan:
    """The answer for one job in one tick.

    ``next_occurrence`` None means "leave the stored value": a paused job keeps its place, and a
    catch-up job waiting for its running run keeps its backlog.
    """

    run: datetime | None = None
    source: TriggerSource = TriggerSource.SCHEDULE
    not_run: list[NotRun] = field(default_factory=list)
    next_occurrence: datetime | None = None
    missed_through: datetime | None = None
    unlisted: int = 0


@dataclass(frozen=True, slots=True)
class DueOccurrences:
    """Occurrences from the stored next one up to ``now``, and the first one after them."""

    due: list[datetime]
    following: datetime | None
    unlisted: int = 0
    nonexistent: list[datetime] = field(default_factory=list)
    """Occurrences up to ``following`` that ``dst_gap = "skip"`` drops: recorded missed."""


def due_occurrences(schedule: Schedule, first: datetime, now: datetime) -> DueOccurrences:
    """Enumerate ``first`` and every later occurrence at or before ``now``.

    Past :data:`MAX_ENUMERATED` the list stops and the remaining count is estimated, so a job
    that was paused for a year costs a bounded amount of work.
    """
    due: list[datetime] = []
    current: datetime | None = first
    while current is not None and current <= now and len(due) < MAX_ENUMERATED:
        due.append(current)
        current = schedule.next_after(current)
    unlisted = 0
    if current is not None and current <= now:
        # Too many to list: count the rest cheaply by stepping through them without keeping them.
        while current is not None and current <= now and unlisted < 100 * MAX_ENUMERATED:
            unlisted += 1
            current = schedule.next_after(current)
        if current is not None and current <= now:
            current = schedule.next_after(now)
    # Recorded when the occurrence before them is handled: no later tick looks at this window.
    nonexistent = schedule.skipped_between(first, current or now)
    return DueOccurrences(due=due, following=current, unlisted=unlisted, nonexistent=nonexistent)


def plan_firing(
    occurrences: DueOccurrences,
    *,
    now: datetime,
    policy: JobPolicy,
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
    plan = _plan(
        occurrences,
        now=now,
        policy=policy,
        paused=paused,
        blocked=blocked,
        missed_through=missed_through,
    )
    if not occurrences.nonexistent:
        return plan
    skipped = _unrecorded(occurrences.nonexistent, "missed", REASON_NONEXISTENT, missed_through)
    return replace(plan, not_run=[*plan.not_run, *skipped])


def _plan(
    occurrences: DueOccurrences,
    *,
    now: datetime,
    policy: JobPolicy,
    paused: bool,
    blocked: bool,
    missed_through: datetime | None,
) -> FiringPlan:
    due = occurrences.due

    def _not_run(items: list[datetime], outcome: str, reason: str) -> list[NotRun]:
        return _unrecorded(items, outcome, reason, missed_through)

    if paused:
        return FiringPlan(
            not_run=_not_run(due, "missed", REASON_PAUSED),
            missed_through=due[-1],
            unlisted=occurrences.unlisted,
        )
    if policy.misfire is MisfirePolicy.CATCH_UP:
        return _catch_up(occurrences, policy, blocked, missed_through)
    if blocked:
        return _advanced(
            occurrences, None, _not_run(due, "skipped", REASON_OVERLAP), missed_through
        )
    if policy.misfire is MisfirePolicy.SKIP:
        grace = policy.misfire_grace or DEFAULT_MISFIRE_GRACE
        too_late = [o for o in due if now - o > grace]
        in_time = [o for o in due if now - o <= grace]
        not_run = _not_run(too_late, "missed", REASON_GRACE)
        if not in_time:
            return _advanced(occurrences, None, not_run, missed_through)
        not_run += _not_run(in_time[:-1], "missed", REASON_DOWNTIME)
        return _advanced(occurrences, in_time[-1], not_run, missed_through)
    # run_once: one run for everything that was missed, then on to the future.
    return _advanced(
        occurrences, due[-1], _not_run(due[:-1], "missed", REASON_DOWNTIME), missed_through
    )


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
    return FiringPlan(
        run=run,
        source=TriggerSource.SCHEDULE if len(occurrences.due) == 1 else TriggerSource.CATCH_UP,
        not_run=not_run,
        next_occurrence=following,
        missed_through=missed_through if keep_marker else None,
        unlisted=occurrences.unlisted,
    )


def _unrecorded(
    items: list[datetime], outcome: str, reason: str, missed_through: datetime | None
) -> list[NotRun]:
    return [
        NotRun(o, outcome, reason) for o in items if missed_through is None or o > missed_through
    ]


def _catch_up(
    occurrences: DueOccurrences,
    policy: JobPolicy,
    blocked: bool,
    missed_through: datetime | None,
) -> FiringPlan:
    due = occurrences.due
    excess = max(len(due) - max(policy.catch_up_limit, 1), 0)
    dropped, kept = due[:excess], due[excess:]
    missed = _unrecorded(dropped, "missed", REASON_CATCH_UP_BOUND, missed_through)
    if blocked:
        # Wait for the running run: the backlog keeps its place, only its bound is enforced.
        return FiringPlan(
            not_run=missed,
            next_occurrence=kept[0] if dropped else None,
            unlisted=occurrences.unlisted,
        )
    run = kept[0]
    later = kept[1:]
    return FiringPlan(
        run=run,
        source=TriggerSource.CATCH_UP if later or dropped else TriggerSource.SCHEDULE,
        not_run=missed,
        next_occurrence=later[0] if later else occurrences.following,
        unlisted=occurrences.unlisted,
    )
