"""Reading what a claim may take: pending runs (manual runs, then retries whose backoff has
passed, then backfilled occurrences) and due schedule rows, each oldest first, locked as read
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so replicas divide the work instead of queueing on
it; on SQLite the transaction holds the file).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, or_, select
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, PRIORITY_BACKFILL, RUNNING, ClaimBatch, DueSchedule, RunRecord
from jobhost.store._sql import built, locked
from jobhost.store.claim_model import ClaimRules
from jobhost.store.schema import IS_PENDING, runs, schedules

__all__ = [
    "DUE_COLUMNS",
    "due_job_names",
    "due_pending",
    "due_schedules",
    "live_runs",
]

DUE_COLUMNS = tuple(schedules.c[name] for name in DueSchedule._fields)
"""The schedule columns a claim reads, in :class:`~jobhost.records.DueSchedule`'s order."""


def live_runs(connection: Connection, job_name: str, now: datetime) -> list[RunRecord]:
    """The job's own runs whose lease has not expired: a backfill's runs yield to them and are
    not counted by the overlap rule."""
    query = select(runs).where(
        runs.c.job_name == job_name,
        runs.c.outcome == RUNNING,
        runs.c.lease_expires_at >= now,
        runs.c.backfill_id.is_(None),
    )
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def due_job_names(connection: Connection, now: datetime, limit: int) -> list[str]:
    """Jobs whose schedule row is due at ``now``, oldest first (read without locking)."""
    query = (
        select(schedules.c.job_name)
        .where(schedules.c.due_at <= now)
        .order_by(schedules.c.due_at)
        .limit(limit)
    )
    return list(connection.execute(query).scalars())


def due_pending(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    rules: ClaimRules,
    batch: ClaimBatch,
    run_id: str | None = None,
) -> list[RunRecord]:
    """Pending runs whose ``not_before`` has passed or that have none (a manual run no claim has
    looked at), in claim order (priority, then ``not_before``); with ``run_id``, that one
    pending run whenever it is due."""
    if limit <= 0:
        return []
    if run_id is not None:
        one = locked(connection, select(runs).where(runs.c.id == run_id, runs.c.outcome == PENDING))
        rows = connection.execute(one).mappings()
    else:
        query = built(connection, "due-pending", _due_pending_query)
        rows = connection.execute(query, {"now": now, "skip": skip, "limit": limit}).mappings()
    return _known([RunRecord.from_row(r) for r in rows], rules, batch)


def _due_pending_query(dialect: str) -> Any:
    query = (
        select(runs)
        .where(
            IS_PENDING,
            # A backfill's waiting occurrences are claimed by the backfill claim, after.
            runs.c.priority < PRIORITY_BACKFILL,
            or_(
                runs.c.not_before.is_(None),
                runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
            ),
            runs.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(runs.c.priority, runs.c.not_before.nulls_first())
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def due_schedules(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    only: Collection[str] | None,
    batch: ClaimBatch,
) -> list[DueSchedule]:
    if only is not None:
        query = locked(
            connection,
            select(*DUE_COLUMNS)
            .where(schedules.c.due_at <= now, schedules.c.job_name.in_(sorted(only)))
            .order_by(schedules.c.due_at)
            .limit(limit),
        )
        result = connection.execute(query)
    else:
        query = built(connection, "due-schedules", _due_schedules_query)
        result = connection.execute(query, {"now": now, "skip": skip, "limit": limit})
    rows = [DueSchedule._make(r) for r in result]
    batch.schedules_seen = len(rows)
    return rows


def _due_schedules_query(dialect: str) -> Any:
    query = (
        select(*DUE_COLUMNS)
        .where(
            schedules.c.due_at <= bindparam("now", type_=schedules.c.due_at.type),
            schedules.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(schedules.c.due_at)
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def _skip_locked(query: Any, dialect: str) -> Any:
    """Skip rows another replica holds (PostgreSQL); SQLite's transaction holds the file."""
    return query.with_for_update(skip_locked=True) if dialect == "postgresql" else query


def _known(found: list[RunRecord], rules: ClaimRules, batch: ClaimBatch) -> list[RunRecord]:
    """The rows of jobs this host knows; the others' jobs are noted in ``batch.unknown``."""
    batch.unknown |= {r.job_name for r in found if not rules.knows(r.job_name)}
    return [r for r in found if rules.knows(r.job_name)]
