"""What to do with the occurrences of one job that have come due: pure, no database, no clock.

The firing loop enumerates the due occurrences, asks :func:`plan_firing` which one runs and what
happens to the rest, and writes the answer in one transaction. Every occurrence that does not run
is recorded with a reason, so "did it run last Tuesday?" always has an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from jobhost_contracts import JobPolicies, MisfirePolicy, TriggerSource

from jobhost.triggers import Schedule
from jobhost.triggers.search import GapCount, count_between, newest_at_or_before

__all__ = [
    "DEFAULT_MISFIRE_GRACE",
    "MAX_LISTED",
    "DueOccurrences",
    "FiringPlan",
    "Gap",
    "NotRun",
    "due_occurrences",
    "keep",
    "plan_firing",
]

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
            f"{reason}: {self.count.text()} occurrences from {_iso(self.first)} to before "
            f"{_iso(self.before)}, recorded as this one row",
        )


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


@dataclass(frozen=True, slots=True)
class DueOccurrences:
    """Occurrences from the stored next one up to ``now``, and the first one after them.

    ``due`` lists at most :data:`MAX_LISTED` of the oldest and the newest few the policy needs;
    ``gap``, when set, stands for every occurrence between ``due[gap_at - 1]`` and
    ``due[gap_at]``.
    """

    due: list[datetime]
    following: datetime | None
    gap: Gap | None = None
    gap_at: int = 0
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
        gap_at=len(head),
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
    if not occurrences.due:
        return FiringPlan()
    plan = _plan(
        occurrences,
        now=now,
        policy=policy,
        paused=paused,
        blocked=blocked,
        missed_through=missed_through,
    )
    not_run = [*plan.not_run, *_rows(occurrences.nonexistent, "missed", REASON_NONEXISTENT)]
    if missed_through is not None:
        not_run = [row for row in not_run if row.occurrence > missed_through]
    return replace(plan, not_run=not_run)


def _plan(
    occurrences: DueOccurrences,
    *,
    now: datetime,
    policy: JobPolicies,
    paused: bool,
    blocked: bool,
    missed_through: datetime | None,
) -> FiringPlan:
    due = occurrences.due

    def with_gap(outcome: str, reason: str) -> list[NotRun]:
        return _rows(due, outcome, reason) + _gap_row(occurrences, outcome, reason)

    if paused:
        return FiringPlan(not_run=with_gap("missed", REASON_PAUSED), missed_through=due[-1])
    if policy.misfire is MisfirePolicy.CATCH_UP:
        return _catch_up(occurrences, policy, blocked)
    if blocked:
        return _advanced(occurrences, None, with_gap("skipped", REASON_OVERLAP), missed_through)
    if policy.misfire is MisfirePolicy.SKIP:
        grace = policy.misfire_grace or DEFAULT_MISFIRE_GRACE
        too_late = [o for o in due if now - o > grace]
        in_time = [o for o in due if now - o <= grace]
        gap = occurrences.gap
        gap_late = gap is not None and now - gap.before > grace
        not_run = _rows(too_late, "missed", REASON_GRACE)
        not_run += _gap_row(occurrences, "missed", REASON_GRACE if gap_late else REASON_DOWNTIME)
        if not in_time:
            return _advanced(occurrences, None, not_run, missed_through)
        not_run += _rows(in_time[:-1], "missed", REASON_DOWNTIME)
        return _advanced(occurrences, in_time[-1], not_run, missed_through)
    # run_once: one run for everything that was missed, then on to the future.
    not_run = _rows(due[:-1], "missed", REASON_DOWNTIME)
    not_run += _gap_row(occurrences, "missed", REASON_DOWNTIME)
    return _advanced(occurrences, due[-1], not_run, missed_through)


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


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
