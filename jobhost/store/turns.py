"""The firing loop's store operations, one transaction each: write the catalog's schedules at
start-up; on every turn claim what is due and read, in the same transaction, when the store next
needs this host; after a failed batch, claim one job at a time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.store.backfill_claims import claim_backfills, open_backfills, settle_backfills
from jobhost.store.claims import ClaimBatch, ClaimRules, claim_work, due_job_names
from jobhost.store.engine import reading
from jobhost.store.group_limits import write_group_limits, write_group_members
from jobhost.store.registry import DesiredSchedule, SyncPlan, sync_schedules
from jobhost.store.wakeups import Wakeups, next_wakeups

__all__ = [
    "claim_job",
    "claim_turn",
    "due_jobs",
    "look_ahead",
    "settle_open_backfills",
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
    now: datetime,
    slots: int,
    request_slots: int,
    rules: ClaimRules,
    skip: Collection[str],
) -> tuple[ClaimBatch, Wakeups, bool]:
    """Claim up to ``slots`` runs (see :func:`~jobhost.store.claims.claim_work`), then
    backfilled occurrences in the slots nothing else took, and read when the store next needs
    this host, leaving alone ``skip`` and the jobs the batch did not know. The last value says
    whether a backfill is still unfinished."""
    with engine.begin() as connection:
        batch = claim_work(
            connection,
            host_id=host_id,
            now=now,
            slots=slots,
            request_slots=request_slots,
            rules=rules,
            skip=skip,
        )
        backfilled = claim_backfills(
            connection,
            host_id=host_id,
            now=now,
            slots=slots - len(batch.claims),
            rules=rules,
            skip=sorted(set(skip) | batch.unknown),
        )
        batch.claims.extend(backfilled.claims)
        wakeups = next_wakeups(connection, now, skip=sorted(set(skip) | batch.unknown))
    return batch, wakeups, bool(backfilled.open)


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


def look_ahead(engine: Engine, now: datetime, *, skip: Sequence[str] = ()) -> Wakeups:
    """When the store next needs this host (see :func:`~jobhost.store.wakeups.next_wakeups`)."""
    with reading(engine) as connection:
        return next_wakeups(connection, now, skip=skip)


def settle_open_backfills(engine: Engine, now: datetime) -> None:
    """Mark finished the backfills whose every occurrence has run (see
    :func:`~jobhost.store.backfill_claims.settle_backfills`)."""
    with engine.begin() as connection:
        settle_backfills(connection, now, open_backfills(connection))
