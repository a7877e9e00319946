"""Backfills: which past occurrences of a job one replays (the schedule's as the hosts fire it,
chosen by mode from the ledger), recording, cancelling and following one, and its JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from jobhost.catalog import JobSpec
from jobhost.operations.runs import Progress, watching
from jobhost.operations.timefmt import iso_utc
from jobhost.records import BackfillRecord, ScheduleRecord
from jobhost.rules import MODES, FiringRules, desired_schedules, select_occurrences
from jobhost.store import Store
from jobhost.store.actions import Backfill
from jobhost.store.snapshot import JobRead
from jobhost.triggers import Schedule
from jobhost.triggers.ranges import BoundError, occurrences_in, parse_bound

__all__ = [
    "BACKFILL_ID",
    "BackfillInputError",
    "BackfillPlan",
    "backfill_json",
    "cancel_backfill",
    "find_backfill",
    "plan_and_start",
    "plan_backfill",
    "progress_line",
    "see_through",
    "start_backfill",
]

_ANY_LEASE = timedelta(minutes=5)  # the rules need one; a schedule does not depend on it


class BackfillInputError(ValueError):
    """A backfill that cannot be planned as asked; the message says why and how to fix it."""


@dataclass(frozen=True)
class BackfillPlan:
    """The occurrences a backfill of ``job`` in ``mode`` over ``[start, end)`` replays."""

    job: str
    mode: str
    start: datetime
    end: datetime
    in_range: int
    occurrences: tuple[datetime, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "mode": self.mode,
            "from": iso_utc(self.start),
            "to": iso_utc(self.end),
            "occurrences": [iso_utc(o) for o in self.occurrences],
        }


def plan_backfill(
    spec: JobSpec,
    store: Store,
    *,
    start: str,
    end: str,
    mode: str,
    limit: int,
) -> BackfillPlan:
    """The plan for replaying job ``spec`` from ``start`` (inclusive) to ``end`` (exclusive);
    ``limit`` is the ``backfill_limit`` setting."""
    name, now = spec.name, store.now()
    row = store.list_schedules([name]).get(name)
    zone = row.timezone if row is not None else spec.trigger.timezone
    if mode not in MODES:
        raise BackfillInputError(
            f"job {name}: unknown --mode {mode!r}; use one of {', '.join(MODES)}"
        )
    first, last = _bound(name, "--from", start, zone), _bound(name, "--to", end, zone)
    if last <= first:
        raise BackfillInputError(
            f"job {name}: --to ({iso_utc(last)}) must be after --from ({iso_utc(first)}); "
            "the range is from ≤ occurrence < to"
        )
    if last > now:
        raise BackfillInputError(
            f"job {name}: the range reaches the future (--to {iso_utc(last)} is after now, "
            f"{iso_utc(now)}); a backfill replays past occurrences: give --to {iso_utc(now)} "
            "or earlier"
        )
    found = occurrences_in(_schedule(spec, row, now), first, last, limit=limit)
    if found.over_limit:
        raise BackfillInputError(
            f"job {name}: the range holds {found.count_text} occurrences, more than "
            f"backfill_limit ({limit:,}); narrow --from/--to, or raise backfill_limit in the "
            "settings (JOBHOST_BACKFILL_LIMIT)"
        )
    ledger: dict[datetime, str] = {}
    if found.occurrences:
        ledger = store.job_page(JobRead(name, occurrences=(first, last))).outcomes
    chosen = select_occurrences(mode, found.occurrences, ledger)
    return BackfillPlan(name, mode, first, last, len(found.occurrences), tuple(chosen))


def _schedule(spec: JobSpec, row: ScheduleRecord | None, now: datetime) -> Schedule:
    schedule: Schedule | None
    if row is not None and row.trigger_kind is not None:
        # What the hosts fire by: the same rules, the row's trigger and interval phase.
        try:
            schedule = FiringRules({spec.name: spec}, _ANY_LEASE).schedule_of(row)
        except (ValueError, LookupError) as error:
            raise BackfillInputError(
                f"job {spec.name}: its stored trigger cannot be used ({error}); start a host "
                "with the current catalog, then backfill"
            ) from None
    else:
        # Never scheduled: a cron needs no phase; an interval has none yet, so no past.
        schedule = spec.schedule(now) if spec.trigger.kind == "cron" else None
    if schedule is None and spec.trigger.kind == "interval":
        raise BackfillInputError(
            f"job {spec.name}: its interval has no phase in the store yet (no host has run it), "
            "so it has no past occurrences to replay; use jobhost trigger to run it now"
        )
    if schedule is None:
        raise BackfillInputError(
            f"job {spec.name} has no schedule, so it has no past occurrences to replay; "
            "use jobhost trigger to run it now"
        )
    return schedule


def _bound(name: str, option: str, text: str, zone: str) -> datetime:
    try:
        return parse_bound(text, zone)
    except BoundError as error:
        raise BackfillInputError(f"job {name}: {option} {error}") from None


def start_backfill(
    store: Store,
    spec: JobSpec,
    plan: BackfillPlan,
    *,
    concurrency: int,
    actor: str,
    reason: str | None,
) -> str:
    backfill = Backfill(
        spec.name,
        start=plan.start,
        end=plan.end,
        mode=plan.mode,
        occurrences=plan.occurrences,
        concurrency=concurrency,
        schedules=desired_schedules({spec.name: spec}),
    )
    return store.act(backfill, actor=actor, reason=reason, clock=store.clock)


def plan_and_start(
    store: Store,
    spec: JobSpec,
    *,
    start: str,
    end: str,
    mode: str,
    limit: int,
    concurrency: int,
    actor: str,
    reason: str | None,
    dry_run: bool,
) -> tuple[BackfillPlan, str | None]:
    """The plan, recorded (with its id) unless ``dry_run`` or it replays nothing."""
    plan = plan_backfill(spec, store, start=start, end=end, mode=mode, limit=limit)
    if dry_run or not plan.occurrences:
        return plan, None
    return plan, start_backfill(
        store, spec, plan, concurrency=concurrency, actor=actor, reason=reason
    )


BACKFILL_ID = re.compile(r"[0-9a-f]{32}")


def find_backfill(store: Store, backfill_id: str) -> BackfillRecord | None:
    """None for no such backfill, or for a text no backfill id can be."""
    if not BACKFILL_ID.fullmatch(backfill_id):
        return None
    return next(iter(store.list_backfills(ids=[backfill_id])), None)


def cancel_backfill(
    store: Store,
    backfill_id: str,
    *,
    actor: str,
    reason: str | None = None,
) -> BackfillRecord | None:
    """Stop a backfill claiming new occurrences (its runs in flight finish); None: no such
    backfill."""
    return store.settle_backfill(backfill_id, store.clock, cancelled_by=actor, reason=reason)


_FOLLOW_SECONDS = 1.0


def see_through(
    store: Store,
    backfill_id: str,
    *,
    hosts: bool,
    run_here: Callable[[str], None],
    progress: Progress,
) -> tuple[BackfillRecord, bool]:
    """Follow the backfill while ``hosts`` run it, and run it here when there are none (or
    once they are gone), until it is finished or the operator detaches (Ctrl-C: it stays in
    the store for any host); where it ended, and whether it had not finished."""
    try:
        if hosts:
            record = _follow(store, backfill_id, progress)
            if record is not None:
                return record, False
            progress("no live host any more: running the rest here")
        run_here(backfill_id)
    except KeyboardInterrupt:
        progress(
            f"detached: backfill {backfill_id} goes on in the store (jobhost backfill --show "
            f"{backfill_id}; --cancel {backfill_id} stops it)"
        )
        return _read(store, backfill_id), True
    record = _read(store, backfill_id)
    return record, not record.finished


def _follow(store: Store, backfill_id: str, progress: Progress) -> BackfillRecord | None:
    """The record once finished, None once the hosts are gone."""
    said = ""
    read = partial(_read, store, backfill_id)
    for record, hosts_alive in watching(store, read, None, _FOLLOW_SECONDS):
        line = progress_line(record)
        if line != said:
            said = line
            progress(line)
        if record.finished:
            return record
        if hosts_alive is False:
            return None
    raise AssertionError("unreachable: the watch ends only by returning")


def _read(store: Store, backfill_id: str) -> BackfillRecord:
    record = store.settle_backfill(backfill_id, store.clock)
    assert record is not None, f"backfill {backfill_id} disappeared"
    return record


def backfill_json(record: BackfillRecord) -> dict[str, Any]:
    counts = record.counts
    return {
        "id": record.id,
        "job": record.job_name,
        "from": iso_utc(record.range_from),
        "to": iso_utc(record.range_to),
        "mode": record.mode,
        "state": record.state,
        "reason": record.reason,
        "actor": record.actor,
        "concurrency": record.concurrency,
        "created_at": iso_utc(record.created_at),
        "finished_at": iso_utc(record.finished_at),
        "selected": record.selected,
        "done": record.settled,
        "succeeded": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0),
        "running": counts.get("claimed", 0),
        "pending": counts.get("pending", 0),
    }


def progress_line(record: BackfillRecord) -> str:
    """``backfill ID: 3 of 10 done (2 succeeded, 1 failed), 1 running, state running``."""
    counts = record.counts
    return (
        f"backfill {record.id}: {record.settled} of {record.selected} done "
        f"({counts.get('succeeded', 0)} succeeded, {counts.get('failed', 0)} failed), "
        f"{counts.get('claimed', 0)} running, state {record.state}"
    )
