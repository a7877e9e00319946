"""What an operator writes about a failure besides a retry: an acknowledgement, which resolves
it without a rerun (``jobhost failures --ack RUN_ID``). It is only a change-log entry
(``ack``, naming the run): whether a failure is open is derived, never stored
(``jobhost.store.resolution``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import Resolution, RunRecord
from jobhost.store.clock import database_now
from jobhost.store.resolution import ACK, resolutions
from jobhost.store.run_actions import lock_run
from jobhost.store.runtime import record_change
from jobhost.store.schema import runs, schedules

__all__ = ["Acknowledged", "ack_logged", "module_jobs", "runs_by_id"]


@dataclass(frozen=True)
class Acknowledged:
    run: RunRecord
    at: datetime


def ack_logged(
    engine: Engine,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock,
    check: Callable[[RunRecord | None, Resolution | None], RunRecord],
) -> Acknowledged:
    """Acknowledge failed run ``run_id`` and log it. ``check`` is given the locked run (None:
    no such run) and how it was resolved already (None: open); it returns the run or raises
    to refuse."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        found = lock_run(connection, run_id)
        resolved = resolutions(connection, [found]).get(found.id) if found is not None else None
        run = check(found, resolved)
        record_change(
            connection,
            at=now,
            actor=actor,
            action=ACK,
            job_name=run.job_name,
            before={"run_id": run.id, "outcome": run.outcome},
            after={"run_id": run.id, "acknowledged": True},
            reason=reason,
        )
    return Acknowledged(run, now)


def module_jobs(connection: Connection, module: str) -> list[str]:
    """The names of the jobs the store holds for ``module``."""
    query = select(schedules.c.job_name).where(schedules.c.module == module)
    return sorted(str(name) for name in connection.execute(query).scalars())


def runs_by_id(connection: Connection, run_ids: Collection[str]) -> list[RunRecord]:
    """The runs of ``run_ids`` that exist, newest finish first (what a bulk retry confirms)."""
    if not run_ids:
        return []
    query = (
        select(runs)
        .where(runs.c.id.in_(sorted(set(run_ids))))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
    )
    return [RunRecord.from_row(row) for row in connection.execute(query).mappings()]
