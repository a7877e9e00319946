"""Rows a host cannot use: found for ``jobhost health``'s ``store-integrity`` check.

A host sets such a row's job aside and runs the others; this module lets an operator see them,
each with the row and the fix. It reads every schedule and every running run, so it belongs to
the health check, never to a turn of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.store.claims import schedule_problem
from jobhost.store.records import RUNNING, RunRecord, ScheduleRecord
from jobhost.store.schema import runs, schedules

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
    """Every schedule row and running run a host would set aside or could not judge."""
    found: list[CorruptRow] = []
    for mapping in connection.execute(select(schedules).order_by(schedules.c.job_name)).mappings():
        row = ScheduleRecord.from_row(mapping)
        problem = schedule_problem(row)
        if problem is None and _needs_next(row) and row.next_occurrence is None:
            problem = (
                "next_occurrence is not a time; restart a host to recompute it from the trigger"
            )
        if problem is not None:
            found.append(CorruptRow(row.job_name, "schedules", problem))
    for mapping in connection.execute(select(runs).where(runs.c.outcome == RUNNING)).mappings():
        run = RunRecord.from_row(mapping)
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


def _needs_next(row: ScheduleRecord) -> bool:
    return row.enabled and not row.orphaned and not row.paused and row.trigger_kind is not None
