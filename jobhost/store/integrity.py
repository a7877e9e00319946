"""Rows a host cannot use: found for ``jobhost health``'s ``store-integrity`` check.

A host sets such a row's job aside and runs the others; this module lets an operator see them,
each with the row and the fix. It reads every row of every table as the database holds it (a
hand edit or a broken restore on SQLite can leave any text in any column), so it belongs to the
health check, never to a turn of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, Table, select
from sqlalchemy.engine import Connection

from jobhost.store.claims import schedule_problem
from jobhost.store.records import RUNNING, TERMINAL_OUTCOMES, RunRecord, ScheduleRecord
from jobhost.store.schema import (
    hosts,
    job_idempotency,
    job_state,
    run_requests,
    runs,
    schedules,
    signals,
)
from jobhost.store.types import UTCDateTime
from jobhost.triggers import load_zone

__all__ = ["CorruptRow", "corrupt_rows", "stuck_runs"]


@dataclass(frozen=True, slots=True)
class CorruptRow:
    job_name: str
    where: str
    """``schedules`` or ``runs <id>``."""
    problem: str

    def line(self) -> str:
        return f"{self.job_name} ({self.where}): {self.problem}"


def corrupt_rows(connection: Connection, now: datetime, implausible: timedelta) -> list[CorruptRow]:
    """Every row a host would set aside or could not judge: values of the wrong type in any
    table, and schedules and running runs that make no sense."""
    found = [row for table in _TABLES for row in _mistyped(connection, table)]
    broken = {row.job_name for row in found}
    for mapping in connection.execute(select(schedules).order_by(schedules.c.job_name)).mappings():
        row = ScheduleRecord.from_row(mapping)
        if row.job_name in broken:
            continue  # already named, column by column
        problem = schedule_problem(row)
        if problem is None and row.lease_expires_at and row.lease_expires_at > now + implausible:
            problem = (
                f"lease_expires_at {row.lease_expires_at:%Y-%m-%dT%H:%M:%SZ} is further ahead "
                "than any renewal sets (the hosts treat it as expired); set it to NULL"
            )
        if problem is None and _needs_next(row) and row.next_occurrence is None:
            problem = (
                "next_occurrence is not a time; restart a host to recompute it from the trigger"
            )
        if problem is not None:
            found.append(CorruptRow(row.job_name, "schedules", problem))
    for mapping in connection.execute(select(runs).where(runs.c.outcome == RUNNING)).mappings():
        run = RunRecord.from_row(mapping)
        if f"runs {run.id}" in {row.where for row in found}:
            continue
        if run.lease_expires_at is None:
            problem = "lease_expires_at is not a time"
        elif run.lease_expires_at > now + implausible:
            problem = (
                f"lease_expires_at {run.lease_expires_at:%Y-%m-%dT%H:%M:%SZ} is further ahead "
            )
            problem += "than any renewal sets"
        else:
            continue
        found.append(
            CorruptRow(
                run.job_name,
                f"runs {run.id}",
                f"{problem}; a host records the run abandoned once its host {run.host_id} is "
                "gone (or set lease_expires_at to the current time)",
            )
        )
    return found


def stuck_runs(connection: Connection) -> list[RunRecord]:
    """Running runs whose executor ignored cancellation and whose thread still runs."""
    query = select(runs).where(runs.c.outcome == RUNNING, runs.c.error_type == "Stuck")
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


_TABLES = (schedules, runs, hosts, run_requests, job_state, job_idempotency, signals)
# Text columns that hold one of a few words.
_WORDS: dict[tuple[str, str], frozenset[str]] = {
    ("schedules", "trigger_kind"): frozenset({"cron", "interval"}),
    ("schedules", "trigger_source"): frozenset({"declaration", "override", "api"}),
    ("schedules", "last_outcome"): TERMINAL_OUTCOMES | {RUNNING},
    ("runs", "outcome"): TERMINAL_OUTCOMES | {RUNNING, "pending"},
    ("runs", "source"): frozenset({"schedule", "catch-up", "manual", "retry"}),
    ("run_requests", "status"): frozenset({"pending", "claimed", "started", "refused"}),
}


def _mistyped(connection: Connection, table: Table) -> list[CorruptRow]:
    """Values that are not of their column's type, read raw (no type conversion)."""
    columns = list(table.columns)
    raw = connection.exec_driver_sql(
        f"SELECT {', '.join(c.name for c in columns)} FROM {table.name}"
    )
    found: list[CorruptRow] = []
    for values in raw:
        row = dict(zip((c.name for c in columns), values, strict=True))
        for column in columns:
            value = row[column.name]
            if value is None:
                continue
            expected = _expected(table.name, column, value)
            if expected is not None:
                job, where = _locate(table.name, row)
                found.append(
                    CorruptRow(
                        job,
                        where,
                        f"{column.name} is {str(value)[:60]!r}, not {expected}; fix or delete "
                        "the row (the hosts set its job aside meanwhile)",
                    )
                )
    return found


def _expected(table: str, column: Any, value: object) -> str | None:
    """What ``value`` should have been, or None when it is fine."""
    kind = column.type
    if isinstance(kind, UTCDateTime):
        if isinstance(value, datetime):
            return None
        try:
            datetime.fromisoformat(str(value))
        except ValueError:
            return "a time"
        return None
    if isinstance(kind, Boolean):
        return None if value in (0, 1) else "true or false"
    if isinstance(kind, Integer | BigInteger):
        return None if isinstance(value, int) and not isinstance(value, bool) else "a number"
    words = _WORDS.get((table, column.name))
    if words is not None and value not in words:
        return f"one of {', '.join(sorted(words))}"
    if table == "schedules" and column.name == "timezone":
        try:
            load_zone(str(value))
        except LookupError:
            return "a time zone name (e.g. Europe/Berlin)"
    return None


def _locate(table: str, row: dict[str, Any]) -> tuple[str, str]:
    job = str(row.get("job_name") or "-")
    if table == "schedules":
        return job, "schedules"
    if table in {"runs", "run_requests"}:
        return job, f"{table} {row.get('id')}"
    if table in {"job_state", "job_idempotency"}:
        return job, f"{table} {row.get('key')}"
    return f"host {row.get('id')}" if table == "hosts" else "-", table


def _needs_next(row: ScheduleRecord) -> bool:
    return row.enabled and not row.orphaned and not row.paused and row.trigger_kind is not None
