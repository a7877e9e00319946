"""The firing plan: which due occurrence runs, and what is recorded for every other one."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from jobhost_contracts import JobPolicies, MisfirePolicy, OverlapPolicy, TriggerSource

from jobhost.rules import (
    MAX_LISTED,
    FiringPlan,
    NotRun,
    due_occurrences,
    keep,
    plan_firing,
)
from jobhost.triggers import IntervalSchedule, Schedule, cron_schedule
from jobhost.triggers.search import COUNT_STEPS

HOURLY = cron_schedule("0 * * * *")
T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _plan(
    now: datetime,
    *,
    first: datetime = T0,
    policy: JobPolicies | None = None,
    paused: bool = False,
    blocked: bool = False,
    missed_through: datetime | None = None,
) -> FiringPlan:
    return plan_firing(
        due_occurrences(HOURLY, first, now),
        now=now,
        policy=policy or JobPolicies(),
        paused=paused,
        blocked=blocked,
        missed_through=missed_through,
    )


def _hours(*offsets: int) -> list[datetime]:
    return [T0 + timedelta(hours=h) for h in offsets]


def test_nothing_due_plans_nothing() -> None:
    assert _plan(T0 - timedelta(seconds=1)) == FiringPlan()


def test_on_time_occurrence_runs_as_scheduled_and_advances() -> None:
    plan = _plan(T0 + timedelta(milliseconds=3))
    assert plan.run == T0
    assert plan.source is TriggerSource.SCHEDULE
    assert plan.not_run == []
    assert plan.next_occurrence == T0 + timedelta(hours=1)


def test_run_once_after_downtime_runs_the_newest_and_records_the_rest_missed() -> None:
    plan = _plan(T0 + timedelta(hours=3, minutes=10))
    assert plan.run == T0 + timedelta(hours=3)
    assert plan.source is TriggerSource.CATCH_UP
    assert plan.not_run == [NotRun(o, "missed", "downtime") for o in _hours(0, 1, 2)]
    assert plan.next_occurrence == T0 + timedelta(hours=4)


def test_catch_up_runs_the_oldest_first_and_keeps_the_backlog() -> None:
    plan = _plan(
        T0 + timedelta(hours=2, minutes=5), policy=JobPolicies(misfire=MisfirePolicy.CATCH_UP)
    )
    assert plan.run == T0
    assert plan.source is TriggerSource.CATCH_UP
    assert plan.not_run == []
    assert plan.next_occurrence == T0 + timedelta(hours=1)


def test_catch_up_beyond_its_bound_records_the_oldest_missed() -> None:
    policy = JobPolicies(misfire=MisfirePolicy.CATCH_UP, catch_up_limit=2)
    plan = _plan(T0 + timedelta(hours=4, minutes=1), policy=policy)
    assert plan.not_run == [NotRun(o, "missed", "catch-up bound") for o in _hours(0, 1, 2)]
    assert plan.run == T0 + timedelta(hours=3)
    assert plan.next_occurrence == T0 + timedelta(hours=4)


def test_catch_up_waits_for_a_running_run_instead_of_skipping() -> None:
    policy = JobPolicies(misfire=MisfirePolicy.CATCH_UP)
    plan = _plan(T0 + timedelta(hours=1, minutes=1), policy=policy, blocked=True)
    assert plan.run is None
    assert plan.not_run == []
    assert plan.next_occurrence is None


def test_skip_policy_runs_only_within_grace() -> None:
    policy = JobPolicies(misfire=MisfirePolicy.SKIP, misfire_grace=timedelta(minutes=5))
    late = _plan(T0 + timedelta(minutes=6), policy=policy)
    assert late.run is None
    assert late.not_run == [NotRun(T0, "missed", "misfire grace")]
    assert late.next_occurrence == T0 + timedelta(hours=1)
    in_time = _plan(T0 + timedelta(minutes=4), policy=policy)
    assert in_time.run == T0


def test_forbidden_overlap_records_skipped_and_moves_on() -> None:
    plan = _plan(T0 + timedelta(seconds=1), blocked=True)
    assert plan.run is None
    assert plan.not_run == [NotRun(T0, "skipped", "overlap")]
    assert plan.next_occurrence == T0 + timedelta(hours=1)


def test_paused_records_missed_once_and_keeps_its_place() -> None:
    first = _plan(T0 + timedelta(minutes=1), paused=True)
    assert first.not_run == [NotRun(T0, "missed", "paused")]
    assert first.next_occurrence is None
    assert first.missed_through == T0
    later = _plan(T0 + timedelta(hours=1, minutes=1), paused=True, missed_through=T0)
    assert later.not_run == [NotRun(T0 + timedelta(hours=1), "missed", "paused")]


def test_resume_applies_the_misfire_policy_without_recording_twice() -> None:
    through = T0 + timedelta(hours=1)
    plan = _plan(T0 + timedelta(hours=1, minutes=30), missed_through=through)
    assert plan.run == through
    assert plan.not_run == []
    assert plan.missed_through is None
    catch_up = _plan(
        T0 + timedelta(hours=1, minutes=30),
        missed_through=through,
        policy=JobPolicies(misfire=MisfirePolicy.CATCH_UP, overlap=OverlapPolicy.FORBID),
    )
    assert catch_up.run == T0


class _CountingSchedule:
    """A schedule that counts how often the plan asks it for the next occurrence."""

    def __init__(self, inner: Schedule) -> None:
        self.inner = inner
        self.calls = 0

    def next_after(self, after: datetime) -> datetime | None:
        self.calls += 1
        return self.inner.next_after(after)

    def iter_after(self, after: datetime, limit: int) -> list[datetime]:
        return self.inner.iter_after(after, limit)

    def skipped_between(self, after: datetime, until: datetime) -> list[datetime]:
        return self.inner.skipped_between(after, until)

    def describe(self) -> str:
        return self.inner.describe()


THREE_DAYS = 3 * 24 * 3600


@dataclass(frozen=True)
class _CountingInterval(IntervalSchedule):
    calls: list[int] = field(default_factory=list)

    def next_after(self, after: datetime) -> datetime:
        self.calls.append(1)
        return super().next_after(after)


def test_a_three_day_gap_of_a_per_second_interval_is_one_bounded_step() -> None:
    counting = _CountingInterval(timedelta(seconds=1), T0)
    now = T0 + timedelta(seconds=THREE_DAYS, milliseconds=500)
    due = due_occurrences(counting, T0, now)
    assert len(due.due) == MAX_LISTED + 1  # the oldest ones, and the newest that runs
    assert due.due[-1] == T0 + timedelta(seconds=THREE_DAYS)
    assert due.following == T0 + timedelta(seconds=THREE_DAYS + 1)
    assert due.gap is not None
    assert due.gap.first == T0 + timedelta(seconds=MAX_LISTED)
    # Every occurrence is listed or counted, exactly: 3 days of seconds, plus T0 itself.
    assert due.gap.count.exact
    assert len(due.due) + due.gap.count.count == THREE_DAYS + 1
    # Listing the head walks; the jump and the count are arithmetic.
    assert len(counting.calls) <= MAX_LISTED + 5


def test_a_three_day_gap_of_a_per_second_cron_is_bounded_and_says_when_it_estimates() -> None:
    counting = _CountingSchedule(cron_schedule("* * * * * *"))
    now = T0 + timedelta(seconds=THREE_DAYS, milliseconds=500)
    due = due_occurrences(counting, T0, now)
    assert due.due[-1] == T0 + timedelta(seconds=THREE_DAYS)
    assert due.gap is not None
    assert not due.gap.count.exact
    assert due.gap.count.text().startswith("about ")
    total = len(due.due) + due.gap.count.count
    assert abs(total - (THREE_DAYS + 1)) <= THREE_DAYS // 1000
    assert counting.calls <= MAX_LISTED + COUNT_STEPS + 200


def test_a_short_cron_gap_is_counted_exactly() -> None:
    every_minute = cron_schedule("* * * * *")
    now = T0 + timedelta(hours=5)
    due = due_occurrences(every_minute, T0, now)
    assert due.gap is not None
    assert due.gap.count.exact
    assert len(due.due) + due.gap.count.count == 5 * 60 + 1


def test_the_gap_is_recorded_as_one_summary_row_with_its_count_and_range() -> None:
    every_second = IntervalSchedule(timedelta(seconds=1), T0)
    now = T0 + timedelta(seconds=THREE_DAYS)
    plan = plan_firing(
        due_occurrences(every_second, T0, now),
        now=now,
        policy=JobPolicies(),
        paused=False,
        blocked=False,
        missed_through=None,
    )
    assert plan.run == now
    assert len(plan.not_run) == MAX_LISTED + 1
    summary = plan.not_run[-1]
    assert summary.occurrence == T0 + timedelta(seconds=MAX_LISTED)
    assert summary.outcome == "missed"
    count = THREE_DAYS - MAX_LISTED
    assert summary.reason.startswith(f"downtime: {count:,} occurrences from ")
    assert plan.next_occurrence == now + timedelta(seconds=1)


def test_catch_up_after_a_long_gap_keeps_only_its_newest_bound() -> None:
    every_minute = cron_schedule("* * * * *")
    now = T0 + timedelta(days=2, seconds=30)
    policy = JobPolicies(misfire=MisfirePolicy.CATCH_UP, catch_up_limit=3)
    due = due_occurrences(every_minute, T0, now, keep=keep(policy))
    plan = plan_firing(
        due, now=now, policy=policy, paused=False, blocked=False, missed_through=None
    )
    newest = T0 + timedelta(days=2)
    assert plan.run == newest - timedelta(minutes=2)
    assert plan.next_occurrence == newest - timedelta(minutes=1)
    assert due.gap is not None
    assert len(due.due) + due.gap.count.count == 2 * 24 * 60 + 1


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_every_due_occurrence_is_run_or_recorded(policy: MisfirePolicy) -> None:
    now = T0 + timedelta(hours=5, minutes=30)
    plan = _plan(now, policy=JobPolicies(misfire=policy, catch_up_limit=3))
    accounted = {n.occurrence for n in plan.not_run} | ({plan.run} if plan.run else set())
    pending = {
        o for o in _hours(0, 1, 2, 3, 4, 5) if plan.next_occurrence and o >= plan.next_occurrence
    }
    assert accounted | pending == set(_hours(0, 1, 2, 3, 4, 5))
