"""The firing policy as the claim asks for it: which jobs this host runs, leases, overlap, plans.

A due row is planned by the trigger the STORE holds, not by this host's catalog: during a
rolling deploy the newest catalog to start wrote it, and every replica fires by it (see
``docs/operations/semantics.md``). The schedules built from stored triggers are kept, so a turn
parses nothing it has seen before.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from jobhost_contracts import OverlapPolicy, RetryPolicy, parse_duration

from jobhost.catalog import JobSpec
from jobhost.records import PlannedRow, SchedulePlan
from jobhost.rules.plan import due_occurrences, keep, plan_firing
from jobhost.rules.policy import lease_for, may_start
from jobhost.triggers import CronSchedule, IntervalSchedule, Schedule, cron_schedule

__all__ = ["FiringRules"]

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
            return spec.schedule(anchor) if anchor is not None else spec.schedule(row.created_at)
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
