"""The firing loop's store operations, one transaction each: write the catalog's schedules at
start-up; on every turn claim what is due (backfilled occurrences too, in the workers still free)
and read, in the same transaction, when the store next needs this host; after a failed batch,
claim one job at a time.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from jobhost.clock import Clock
from jobhost.records import ClaimBatch, DesiredSchedule, Quiet, SyncPlan
from jobhost.store.claims import ClaimRules, claim_work, due_job_names
from jobhost.store.engine import database_now, reading
from jobhost.store.group_limits import write_group_limits, write_group_members
from jobhost.store.registry import sync_schedules
from jobhost.store.wakeups import Wakeups, next_wakeups

__all__ = [
    "Turn",
    "claim_job",
    "claim_turn",
    "due_jobs",
    "look_ahead",
    "sync_catalog",
]


def sync_catalog(
    engine: Engine,
    desired: Sequence[DesiredSchedule],
    now: datetime,
    *,
    catalog_version: str | None = None,
    limits: Mapping[str, int],
    members: Mapping[str, str | None],
) -> SyncPlan:
    """Write the catalog's schedules and concurrency groups (the newest start wins)."""
    with engine.begin() as connection:
        plan = sync_schedules(connection, desired, now, catalog_version=catalog_version)
        write_group_limits(connection, limits, now)
        write_group_members(connection, members)
        return plan


def claim_turn(
    engine: Engine,
    *,
    host_id: str,
    now: datetime | None,
    clock: Clock,
    slots: int,
    manual_slots: int,
    rules: ClaimRules,
    skip: Collection[str],
    quiet: Quiet | None = None,
    early: timedelta = timedelta(0),
    backfill_slots: int = 0,
) -> Turn:
    """Claim up to ``slots`` runs (see :func:`~jobhost.store.claims.claim_work`) and read when
    the store next needs this host, leaving alone ``skip`` and the jobs the batch did not know.

    With ``now`` None the turn reads the store's time inside this transaction (see
    :func:`~jobhost.store.engine.database_now`), not through a checkout of its own. ``quiet``
    leaves out the read of pending runs when it rules them out. ``early`` claims,
    in the slots left, occurrences due within that long after the turn's instant, to start at
    their own (see :func:`~jobhost.store.claims.claim_work`). ``backfill_slots`` bounds the
    backfilled occurrences it takes; 0 leaves backfills alone."""
    with engine.begin() as connection:
        at = now or database_now(connection, clock)
        read_at = time.monotonic()
        batch = claim_work(
            connection,
            host_id=host_id,
            now=at,
            slots=slots,
            manual_slots=manual_slots,
            rules=rules,
            skip=skip,
            pending=quiet is None or quiet.pending_due(at),
            early_until=at + early if early else None,
            backfill_slots=backfill_slots,
        )
        wakeups = next_wakeups(connection, at, skip=sorted(set(skip) | batch.unknown))
    return Turn(batch, wakeups, at, read_at)


@dataclass(frozen=True)
class Turn:
    """What one :func:`claim_turn` did and read."""

    batch: ClaimBatch
    wakeups: Wakeups
    now: datetime
    """The instant the turn worked at."""
    read_at: float
    """When (monotonic) ``now`` was read or taken: a sleep until a time is measured from it."""


def claim_job(
    engine: Engine,
    job: str,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    skip: Collection[str],
) -> ClaimBatch:
    """Claim what is due of ``job`` alone, in a transaction of its own."""
    with engine.begin() as connection:
        return claim_work(
            connection,
            host_id=host_id,
            now=now,
            slots=slots,
            rules=rules,
            skip=skip,
            schedules_only=[job],
        )


def due_jobs(engine: Engine, now: datetime, limit: int) -> list[str]:
    """Jobs whose schedule row is due at ``now``, oldest first (read without locking)."""
    with reading(engine) as connection:
        return due_job_names(connection, now, limit)


def look_ahead(
    engine: Engine, now: datetime | None, clock: Clock, *, skip: Sequence[str] = ()
) -> tuple[Wakeups, datetime]:
    """When the store next needs this host (see :func:`~jobhost.store.wakeups.next_wakeups`),
    and the instant it looked from (with ``now`` None, the store's, read in the same read)."""
    with reading(engine) as connection:
        at = now or database_now(connection, clock)
        return next_wakeups(connection, at, skip=skip), at
