"""A backfill's plan: which past occurrences of a job it replays, checked before anything runs.

The range comes from the job's effective trigger, its zone and daylight-saving policy, as the
schedule fired (an interval keeps the phase stored in its schedule row); the mode chooses among
them by what the ledger says, read in one statement. Bad input raises :class:`BackfillInputError`
with a message that names the job, what is wrong and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobhost.catalog import JobSpec
from jobhost.operations.timefmt import iso_utc
from jobhost.records import ScheduleRecord
from jobhost.rules.backfill import MODES, select_occurrences
from jobhost.rules.claiming import FiringRules
from jobhost.store import Store
from jobhost.triggers import Schedule
from jobhost.triggers.ranges import BoundError, occurrences_in, parse_bound

__all__ = ["BackfillInputError", "BackfillPlan", "plan_backfill"]

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
    now: datetime,
) -> BackfillPlan:
    """The plan for replaying job ``spec`` from ``start`` (inclusive) to ``end`` (exclusive).

    ``start`` and ``end`` are as the operator wrote them (a date is midnight in the job's zone);
    ``limit`` is the ``backfill_limit`` setting; ``now`` bounds the range, which must be past.
    """
    name = spec.name
    row = store.get_schedule(name)
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
        ledger = store.last_outcomes(name, first, last)
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
    if schedule is None:
        raise BackfillInputError(_no_schedule(spec))
    return schedule


def _bound(name: str, option: str, text: str, zone: str) -> datetime:
    try:
        return parse_bound(text, zone)
    except BoundError as error:
        raise BackfillInputError(f"job {name}: {option} {error}") from None


def _no_schedule(spec: JobSpec) -> str:
    if spec.trigger.kind == "interval":
        return (
            f"job {spec.name}: its interval has no phase in the store yet (no host has run it), "
            "so it has no past occurrences to replay; use jobhost trigger to run it now"
        )
    return (
        f"job {spec.name} has no schedule, so it has no past occurrences to replay; "
        "use jobhost trigger to run it now"
    )
