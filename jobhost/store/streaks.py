"""How many times in a row a job has failed: the dashboard's failure streak.

A streak counts the job's failed, timed-out and abandoned runs that finished after its last
success (every one of them if it never succeeded), read from the index on (job, outcome,
finished time) for a page of jobs at a time, in one statement whose text does not change with
the page, never for the whole catalog.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import bindparam, func, or_, select
from sqlalchemy.engine import Connection

from jobhost.records import FAILED
from jobhost.store.schema import runs, schedules

__all__ = ["failure_streaks"]


def failure_streaks(connection: Connection, names: Collection[str]) -> dict[str, int]:
    """Each of ``names``' failures since its last success; a job with none is left out."""
    if not names:
        return {}
    query = (
        select(runs.c.job_name, func.count())
        .select_from(runs.join(schedules, schedules.c.job_name == runs.c.job_name))
        .where(
            runs.c.job_name.in_(bindparam("names", expanding=True)),
            runs.c.outcome.in_(FAILED),
            or_(
                schedules.c.last_success_at.is_(None),
                runs.c.finished_at > schedules.c.last_success_at,
            ),
        )
        .group_by(runs.c.job_name)
    )
    found = connection.execute(query, {"names": sorted(names)})
    return {str(name): int(count) for name, count in found}
