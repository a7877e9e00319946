"""What a claim batch writes, each in one statement built once whatever the batch size: pending
runs started or refused, schedule rows moved on (and leased when a run started)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, RUNNING, SKIPPED
from jobhost.store._sql import built, json_rows, rows_json
from jobhost.store.schema import runs, schedules

__all__ = [
    "advance_schedules",
    "advance_tokens",
    "lease_schedules",
    "refuse_pending",
    "start_pending",
]


def start_pending(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Pending runs (``b_id``) become running runs of this host."""
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


_MOVED = ("next_occurrence", "due_at", "missed_through")
_LEASED = (*_MOVED, "fencing_token", "lease_owner", "lease_expires_at", "lease_run_id")


def _move_schedules(
    connection: Connection, name: str, columns: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """Write ``columns`` of each job's schedule row (``b_job`` names the job; one row a job).

    On PostgreSQL one statement from JSON whatever the batch size (see
    :func:`~jobhost.store._sql.json_rows`); elsewhere an executemany."""

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
