"""When the store next needs a host: the earliest due schedule, pending run and lease expiry, and
whether a backfill runs (so a host reads backfills only on turns when one does).

Read in one statement at the end of each claim, through indexes, whatever the catalog's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from jobhost.records import PRIORITY_BACKFILL, PRIORITY_MANUAL
from jobhost.store._sql import built
from jobhost.store.schema import IS_PENDING, IS_RUNNING, backfills, runs, schedules

__all__ = ["Wakeups", "next_wakeups", "oldest_due"]

# A lease that expired but whose host may still be alive is looked at again this often.
_EXPIRED_LEASE_RECHECK = timedelta(seconds=1)
# With work still due but nothing claimable (rows another replica holds), look again soon.
_BUSY_RECHECK = timedelta(milliseconds=20)


@dataclass(frozen=True, slots=True)
class Wakeups:
    due_at: datetime | None = None
    """The earliest ``due_at`` among the schedules this host may claim."""
    retry_at: datetime | None = None
    """The earliest ``not_before`` of a pending run this host may take."""
    lease_expiry: datetime | None = None
    """The earliest lease expiry of a running run (its host may have died)."""
    request_at: datetime | None = None
    """When the oldest manual run no claim has looked at yet, of a job this host may take, was
    queued (it has no ``not_before``: due at once)."""
    backfill_at: datetime | None = None
    """When the oldest running backfill was made; None when no backfill runs."""

    def lease_expiry_passed(self, now: datetime) -> bool:
        return self.lease_expiry is not None and self.lease_expiry < now

    def lag(self, now: datetime) -> float:
        """Seconds the oldest due schedule has waited; 0 when nothing is due."""
        if self.due_at is None or self.due_at > now:
            return 0.0
        return (now - self.due_at).total_seconds()

    def next_wake(
        self, now: datetime, *, more_due: bool = False, early: timedelta = timedelta(0)
    ) -> datetime | None:
        """When to look again after a turn at ``now`` whose claim also looked ``early`` ahead
        (see :func:`~jobhost.store.turns.claim_turn`)."""
        times: list[datetime] = []
        if self.due_at is not None:
            # A future occurrence is woken for ``early`` before it, so that its claim is done
            # by its instant; one the turn's claim already saw and left is woken for on time,
            # and one already due that the claim left (rows another replica holds) is looked
            # at again soon, not in a spin.
            busy = not more_due and self.due_at <= now
            if busy:
                times.append(now + _BUSY_RECHECK)
            elif self.due_at > now + early:
                times.append(self.due_at - early)
            else:
                times.append(self.due_at)
        if self.retry_at is not None:
            times.append(max(self.retry_at, now + _BUSY_RECHECK))
        if self.lease_expiry is not None:
            times.append(max(self.lease_expiry, now + _EXPIRED_LEASE_RECHECK))
        if self.request_at is not None:
            times.append(now + _BUSY_RECHECK)
        return min(times) if times else None


def next_wakeups(connection: Connection, now: datetime, *, skip: Sequence[str] = ()) -> Wakeups:
    """One indexed look at what comes next; ``skip`` names jobs this host leaves alone."""
    row = connection.execute(built(connection, "wakeups", _wakeups_query), {"skip": list(skip)})
    return Wakeups(*(value if isinstance(value, datetime) else None for value in row.one()))


def _wakeups_query(_dialect: str) -> Any:
    skip: Any = bindparam("skip", expanding=True)
    due = (
        select(schedules.c.due_at)
        .where(schedules.c.due_at.is_not(None), schedules.c.job_name.not_in(skip))
        .order_by(schedules.c.due_at)
        .limit(1)
    )
    retry = (
        select(runs.c.not_before)
        .where(
            IS_PENDING,
            runs.c.priority < PRIORITY_BACKFILL,
            runs.c.not_before.is_not(None),
            runs.c.job_name.not_in(skip),
        )
        .order_by(runs.c.not_before)
        .limit(1)
    )
    lease = (
        select(runs.c.lease_expires_at)
        .where(IS_RUNNING, runs.c.lease_expires_at.is_not(None))
        .order_by(runs.c.lease_expires_at)
        .limit(1)
    )
    request = (
        select(runs.c.queued_at)
        .where(
            IS_PENDING,
            runs.c.priority == PRIORITY_MANUAL,
            runs.c.not_before.is_(None),
            runs.c.job_name.not_in(skip),
        )
        .order_by(runs.c.queued_at)
        .limit(1)
    )
    backfill = (
        select(backfills.c.created_at)
        # A cancelled backfill with runs still in flight is finished by a claim too.
        .where(backfills.c.finished_at.is_(None))
        .order_by(backfills.c.created_at)
        .limit(1)
    )
    return select(
        due.scalar_subquery(),
        retry.scalar_subquery(),
        lease.scalar_subquery(),
        request.scalar_subquery(),
        backfill.scalar_subquery(),
    )


def oldest_due(connection: Connection) -> datetime | None:
    """The earliest ``due_at`` of any schedule: how far behind every host together is."""
    value = connection.execute(
        select(schedules.c.due_at)
        .where(schedules.c.due_at.is_not(None))
        .order_by(schedules.c.due_at)
        .limit(1)
    ).scalar()
    return value if isinstance(value, datetime) else None
