"""The statements of the claim (see :mod:`jobhost.store.claims`), each built once whatever the
batch size: what a claim may take (pending runs, due schedule rows, a backfill's waiting
occurrences), what it writes, and when the store next needs a host.

What a claim takes is locked as read: ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so replicas
divide the work instead of queueing on it; on SQLite the transaction holds the file.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.engine import Connection

from jobhost.records import (
    PENDING,
    PRIORITY_BACKFILL,
    PRIORITY_MANUAL,
    PRIORITY_RETRY,
    RUNNING,
    SKIPPED,
    Claim,
    DueSchedule,
    RunRecord,
)
from jobhost.store.engine import built, json_rows, locked, rows_json
from jobhost.store.schema import IS_PENDING, IS_RUNNING, backfills, runs, schedules

__all__ = [
    "DUE_COLUMNS",
    "advance_schedules",
    "advance_tokens",
    "backfill_runs",
    "due_job_names",
    "due_pending",
    "due_schedules",
    "lease_schedules",
    "live_runs",
    "next_wakeup_times",
    "oldest_due",
    "open_backfills",
    "refuse_pending",
    "start_pending",
]

DUE_COLUMNS = tuple(schedules.c[name] for name in DueSchedule._fields)
"""The schedule columns a claim reads, in :class:`~jobhost.records.DueSchedule`'s order."""


# -- reads ----------------------------------------------------------------------------------------


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
    connection: Connection, now: datetime, limit: int, *, skip: list[str], run_id: str | None
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
    return [RunRecord.from_row(r) for r in rows]


def due_schedules(
    connection: Connection,
    now: datetime,
    limit: int,
    *,
    skip: list[str],
    only: Collection[str] | None,
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
    return [DueSchedule._make(r) for r in result]


def open_backfills(connection: Connection, now: datetime, only: str | None) -> list[Any]:
    """Running backfills of jobs not paused, oldest first, each with its job's schedule row, its
    runs in flight or waiting to be retried (``in_flight``) and its job's own live runs, outside
    any backfill (``live``), locked together; with ``only``, that backfill even when full."""
    if only is None:
        query = built(connection, "open-backfills", lambda d: _backfills_query(d, one=False))
    else:
        query = built(connection, "one-backfill", lambda d: _backfills_query(d, one=True))
    return list(connection.execute(query, {"now": now, "only": only}).mappings())


def backfill_runs(
    connection: Connection, backfill_id: str, now: datetime, limit: int, *, retries: bool
) -> list[Any]:
    """The backfill's next waiting occurrences, oldest first, through the index on (backfill_id,
    outcome, priority, occurrence); with ``retries``, its retries due."""
    name = "backfill-retries" if retries else "backfill-waiting"
    query = built(connection, name, lambda d: _backfill_runs_query(d, retries=retries))
    found = connection.execute(query, {"backfill": backfill_id, "now": now, "limit": limit})
    return list(found.mappings())


def next_wakeup_times(connection: Connection, *, skip: Sequence[str]) -> list[datetime | None]:
    """In one indexed statement, whatever the catalog's size: the earliest ``due_at`` of the
    schedules not in ``skip``, ``not_before`` of a pending run, lease expiry of a running run,
    ``queued_at`` of a manual run no claim has looked at, and ``created_at`` of an unfinished
    backfill."""
    row = connection.execute(built(connection, "wakeups", _wakeups_query), {"skip": list(skip)})
    return [value if isinstance(value, datetime) else None for value in row.one()]


def oldest_due(connection: Connection) -> datetime | None:
    """The earliest ``due_at`` of any schedule: how far behind every host together is."""
    value = connection.execute(
        select(schedules.c.due_at)
        .where(schedules.c.due_at.is_not(None))
        .order_by(schedules.c.due_at)
        .limit(1)
    ).scalar()
    return value if isinstance(value, datetime) else None


# -- writes ---------------------------------------------------------------------------------------


def start_pending(connection: Connection, claims: list[Claim], host_id: str, now: datetime) -> None:
    """The claimed pending runs become running runs of this host."""
    rows = [
        {
            "b_id": c.run_id,
            "host_id": host_id,
            "fencing_token": c.fencing_token,
            "started_at": now,
            "lease_expires_at": c.lease_until,
            "reason": c.reason,
        }
        for c in claims
    ]
    connection.execute(built(connection, "start-pending", _start_pending), rows)


def refuse_pending(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Manual runs (``b_id``) that cannot start are recorded skipped, with why as their reason."""
    connection.execute(built(connection, "refuse-pending", _refuse_pending), rows)


def advance_schedules(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Schedule rows move to their next occurrence; no run of theirs started."""
    _move_schedules(connection, "advance-schedules", _MOVED, rows)


def lease_schedules(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Schedule rows move on and lease their newest run, with the fencing token advanced."""
    _move_schedules(connection, "lease-schedules", _LEASED, rows)


def advance_tokens(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Schedule rows' fencing tokens move past a backfill's runs, which hold no lease."""
    _move_schedules(connection, "advance-tokens", ("fencing_token",), rows)


_MOVED = ("next_occurrence", "due_at", "missed_through")
_LEASED = (*_MOVED, "fencing_token", "lease_owner", "lease_expires_at", "lease_run_id")


def _move_schedules(
    connection: Connection, name: str, columns: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """Write ``columns`` of each job's schedule row (``b_job`` names the job; one row a job).

    On PostgreSQL one statement from JSON whatever the batch size (see
    :func:`~jobhost.store.engine.json_rows`); elsewhere an executemany."""

    def build(dialect: str) -> Any:
        if dialect == "postgresql":
            source = json_rows(
                [("b_job", schedules.c.job_name.type)]
                + [(column, schedules.c[column].type) for column in columns]
            )
            return (
                update(schedules)
                .where(schedules.c.job_name == source.c.b_job)
                .values(**{column: source.c[column] for column in columns})
            )
        return (
            update(schedules)
            .where(schedules.c.job_name == bindparam("b_job"))
            .values(**{column: bindparam(column) for column in columns})
        )

    statement = built(connection, name, build)
    connection.execute(
        statement, rows_json(rows) if connection.dialect.name == "postgresql" else rows
    )


# -- the statements, built once -------------------------------------------------------------------


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


def _backfills_query(dialect: str, *, one: bool) -> Any:
    in_flight = (
        select(func.count())
        .where(
            runs.c.backfill_id == backfills.c.id,
            or_(
                runs.c.outcome == RUNNING,
                and_(runs.c.outcome == PENDING, runs.c.priority == PRIORITY_RETRY),
            ),
        )
        .scalar_subquery()
    )
    live = (
        select(func.count())
        .where(
            runs.c.job_name == backfills.c.job_name,
            runs.c.outcome == RUNNING,
            runs.c.lease_expires_at >= bindparam("now", type_=runs.c.lease_expires_at.type),
            runs.c.backfill_id.is_(None),
        )
        .scalar_subquery()
    )
    query = (
        select(
            backfills.c.id.label("backfill_id"),
            backfills.c.concurrency.label("backfill_concurrency"),
            in_flight.label("in_flight"),
            live.label("live"),
            schedules,
        )
        .join(schedules, schedules.c.job_name == backfills.c.job_name)
        .where(backfills.c.state == "running", schedules.c.paused.is_(False))
        .order_by(backfills.c.created_at)
    )
    if one:
        # Its retries hold their occurrences' slots and go first: read it even when it is full.
        query = query.where(backfills.c.id == bindparam("only"))
    else:
        query = query.where(backfills.c.concurrency > in_flight)
    if dialect == "postgresql":
        query = query.with_for_update(skip_locked=True, of=[backfills, schedules])
    return query


def _backfill_runs_query(dialect: str, *, retries: bool) -> Any:
    query = select(
        runs.c.id,
        runs.c.occurrence,
        runs.c.attempt,
        runs.c.attempt_base,
        runs.c.source,
        runs.c.idempotency_key,
        runs.c.requested_by,
        runs.c.reason,
    ).where(runs.c.backfill_id == bindparam("backfill"), runs.c.outcome == PENDING)
    if retries:
        query = query.where(
            runs.c.priority == PRIORITY_RETRY,
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
        )
    else:
        query = query.where(runs.c.priority == PRIORITY_BACKFILL)
    query = query.order_by(runs.c.occurrence).limit(bindparam("limit"))
    return _skip_locked(query, dialect)


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


def _start_pending(_dialect: str) -> Any:
    return (
        update(runs)
        .where(runs.c.id == bindparam("b_id"), runs.c.outcome == PENDING)
        .values(
            outcome=RUNNING,
            host_id=bindparam("host_id"),
            fencing_token=bindparam("fencing_token"),
            started_at=bindparam("started_at"),
            lease_expires_at=bindparam("lease_expires_at"),
            reason=bindparam("reason"),
        )
    )


def _refuse_pending(_dialect: str) -> Any:
    return (
        update(runs)
        .where(runs.c.id == bindparam("b_id"), runs.c.outcome == PENDING)
        .values(
            outcome=SKIPPED,
            reason=bindparam("reason"),
            host_id=bindparam("host_id"),
            finished_at=bindparam("finished_at"),
        )
    )


def _skip_locked(query: Any, dialect: str) -> Any:
    """Skip rows another replica holds (PostgreSQL); SQLite's transaction holds the file."""
    return query.with_for_update(skip_locked=True) if dialect == "postgresql" else query
