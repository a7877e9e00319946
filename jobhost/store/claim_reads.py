"""Reading what a claim may take: pending manual requests, retries whose backoff has passed, due
schedule rows, each oldest first, locked as read (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
replicas divide the work instead of queueing on it; on SQLite the transaction holds the file).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from jobhost.store._sql import built, locked
from jobhost.store.claim_model import ClaimBatch, ClaimRules
from jobhost.store.records import PENDING, RUNNING, DueSchedule, RequestRecord, RunRecord
from jobhost.store.schema import IS_PENDING, run_requests, runs, schedules

__all__ = [
    "DUE_COLUMNS",
    "due_job_names",
    "due_retries",
    "due_schedules",
    "live_runs",
    "pending_requests",
]

_Found = TypeVar("_Found", RequestRecord, RunRecord)

DUE_COLUMNS = tuple(schedules.c[name] for name in DueSchedule._fields)
"""The schedule columns a claim reads, in :class:`~jobhost.store.records.DueSchedule`'s order."""


def live_runs(connection: Connection, job_name: str, now: datetime) -> list[RunRecord]:
    """Runs of the job whose lease has not expired."""
    query = select(runs).where(
        runs.c.job_name == job_name, runs.c.outcome == RUNNING, runs.c.lease_expires_at >= now
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


def pending_requests(
    connection: Connection,
    limit: int,
    *,
    skip: list[str],
    request_id: str | None,
    rules: ClaimRules,
    batch: ClaimBatch,
) -> list[RequestRecord]:
    if limit <= 0:
        return []
    if request_id is not None:
        query = locked(
            connection,
            select(run_requests).where(
                run_requests.c.status == PENDING, run_requests.c.id == request_id
            ),
        )
        params: dict[str, Any] = {}
    else:
        query = built(connection, "pending-requests", _pending_requests_query)
        params = {"skip": skip, "limit": limit}
    found = [RequestRecord.from_row(r) for r in connection.execute(query, params).mappings()]
    return _known(found, rules, batch)


def _pending_requests_query(dialect: str) -> Any:
    query = (
        select(run_requests)
        .where(
            run_requests.c.status == PENDING,
            run_requests.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(run_requests.c.requested_at)
        .limit(bindparam("limit"))
    )
    return _skip_locked(query, dialect)


def due_retries(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    rules: ClaimRules,
    batch: ClaimBatch,
    run_id: str | None = None,
) -> list[RunRecord]:
    if limit <= 0:
        return []
    if run_id is not None:
        one = locked(connection, select(runs).where(runs.c.id == run_id, runs.c.outcome == PENDING))
        rows = connection.execute(one).mappings()
    else:
        query = built(connection, "due-retries", _due_retries_query)
        rows = connection.execute(query, {"now": now, "skip": skip, "limit": limit}).mappings()
    return _known([RunRecord.from_row(r) for r in rows], rules, batch)


def _due_retries_query(dialect: str) -> Any:
    query = (
        select(runs)
        .where(
            IS_PENDING,
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
            runs.c.job_name.not_in(bindparam("skip", expanding=True)),
        )
        .order_by(runs.c.not_before)
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


def _known(found: list[_Found], rules: ClaimRules, batch: ClaimBatch) -> list[_Found]:
    """The rows of jobs this host knows; the others' jobs are noted in ``batch.unknown``."""
    batch.unknown |= {r.job_name for r in found if not rules.knows(r.job_name)}
    return [r for r in found if rules.knows(r.job_name)]
