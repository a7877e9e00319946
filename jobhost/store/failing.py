"""Which jobs are failing now, and for how many occurrences in a row: the alerts' state.

A job is failing while the last finished attempt of its newest occurrence failed: until an
attempt of it (a retry, a backfill's run) or of a later occurrence succeeds, however many
attempts it has. Its streak is how many occurrences in a row, counting back from that one,
ended their last attempt failed. Manual runs have no occurrence and take no part.

Only candidates are read from the ledger: jobs whose last run failed, and jobs whose last run
was a retry, a manual run or a backfill's (a success that may belong to an older occurrence
than the newest, or to none). For each, one read walks back through the index on (job,
occurrence, attempt) from its newest occurrence until a success, at most :data:`SCAN_ROWS`
rows: the cost is the streaks', never the ledger's size.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from sqlalchemy import bindparam, or_, select
from sqlalchemy.engine import Connection

from jobhost.records import FAILED, STREAK_LIMIT, Failing, HostRecord, ScheduleRecord
from jobhost.store.reports import schedules_and_hosts
from jobhost.store.schema import runs, schedules

__all__ = [
    "SCAN_ROWS",
    "failing_candidates",
    "failing_jobs",
    "occurrence_streak",
    "occurrence_streaks",
    "schedules_hosts_failing",
]

SCAN_ROWS = 400
"""The most attempts one job's streak reads."""

_SETTLED = (*FAILED, "succeeded")
# A success by one of these may not be the newest occurrence's: the job stays a candidate.
_NOT_SCHEDULED = ("retry", "manual", "backfill")

_STREAK_QUERY = (
    select(runs.c.occurrence, runs.c.outcome)
    .where(
        runs.c.job_name == bindparam("job"),
        runs.c.occurrence.is_not(None),
        runs.c.outcome.in_(_SETTLED),
    )
    .order_by(runs.c.occurrence.desc(), runs.c.attempt.desc())
    .limit(SCAN_ROWS)
)


def failing_jobs(connection: Connection) -> dict[str, Failing]:
    """Every failing job, by name; jobs not failing are left out."""
    candidates = failing_candidates(connection)
    streaks = occurrence_streaks(connection, candidates)
    return {name: Failing(streak, candidates[name]) for name, streak in streaks.items()}


def failing_candidates(connection: Connection) -> dict[str, bool]:
    """Jobs that may be failing (the last run failed, or was not a scheduled one), each with
    whether the store holds it critical."""
    query = (
        select(schedules.c.job_name, schedules.c.critical)
        .select_from(schedules.outerjoin(runs, runs.c.id == schedules.c.last_run_id))
        .where(
            or_(
                schedules.c.last_outcome.in_(FAILED),
                runs.c.source.in_(_NOT_SCHEDULED),
            )
        )
        .order_by(schedules.c.job_name)
    )
    return {str(name): bool(critical) for name, critical in connection.execute(query)}


def occurrence_streaks(connection: Connection, names: Collection[str]) -> dict[str, int]:
    """Of ``names``, the failing jobs' streaks; jobs not failing are left out."""
    found: dict[str, int] = {}
    for name in sorted(set(names)):
        streak = occurrence_streak(connection, name)
        if streak:
            found[name] = streak
    return found


def occurrence_streak(connection: Connection, name: str) -> int:
    """How many of ``name``'s newest occurrences in a row failed without a success (0: the
    job is not failing), up to :data:`STREAK_LIMIT`."""
    rows = connection.execute(_STREAK_QUERY, {"job": name})
    return _count_streak((occurrence, outcome) for occurrence, outcome in rows)


def _count_streak(attempts: Iterable[tuple[datetime, str]]) -> int:
    """The streak of attempts given newest occurrence first, each occurrence's last attempt
    first (pure): only an occurrence's last attempt says whether it failed."""
    streak = 0
    seen: datetime | None = None
    for occurrence, outcome in attempts:
        if occurrence == seen:
            continue
        seen = occurrence
        if outcome == "succeeded" or streak == STREAK_LIMIT:
            break
        streak += 1
    return streak


def schedules_hosts_failing(
    connection: Connection, now: datetime
) -> tuple[dict[str, ScheduleRecord], list[HostRecord], dict[str, Failing]]:
    """Every schedule row, every host and the failing jobs' streaks, read together (the
    metrics' one read)."""
    rows, hosts = schedules_and_hosts(connection, now)
    return rows, hosts, failing_jobs(connection)
