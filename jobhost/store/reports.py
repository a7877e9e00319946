"""The reads behind the report, the health checks and the dashboard, each bounded by an index,
never a scan of the ledger. A scheduled job's last attempt and last success are on its schedule
row, written as each run is recorded; for the whole catalog each read is one statement, with a
correlated subquery for the newest rows, so its cost follows the jobs read, not the ledger's
size.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select, true, union
from sqlalchemy.engine import Connection

from jobhost.records import (
    FAILED,
    NOT_ATTEMPTS,
    PENDING,
    RECENT,
    RUNNING,
    LastAttempt,
    RunRecord,
    ScheduleRecord,
    ScheduleSummary,
)
from jobhost.store.engine import database
from jobhost.store.schema import runs, schedules

__all__ = [
    "LedgerSummary",
    "get_run",
    "get_schedule",
    "ledger_page",
    "ledger_summaries",
    "list_schedules",
    "newest_first",
    "newest_outcomes",
    "newest_rows",
    "newest_runs",
    "read_runs",
    "running_runs",
    "runs_by_id",
    "stored_job_names",
    "summary_schedules",
    "window_runs",
]


# A scope of more names than this is read as the whole catalog, not as a list of parameters.
_NAMED_AT_MOST = 1000

# The most runs the job page's window shows, and the most of its recent failures.
_WINDOW_RUNS = 5000
_RECENT_FAILURES = 10

# The columns of a :class:`LastAttempt` end here in a row of ``_last_attempts``.
_LAST_ATTEMPT_END = 2 + len(fields(LastAttempt))


def newest_first(table: Any) -> tuple[ColumnElement[Any], ...]:
    """Newest first over ``table`` (``runs``, an alias or a subquery of it)."""
    newest = func.coalesce(table.c.started_at, table.c.queued_at)
    return newest.desc(), table.c.occurrence.desc().nulls_last(), table.c.attempt.desc()


def newest_rows(table: Any, *where: ColumnElement[bool], limit: int) -> Select[Any]:
    order = (table.c.started_at, table.c.queued_at, table.c.occurrence, table.c.attempt)
    query = select(table.c.job_name, table.c.outcome, *order).where(*where)
    return query.order_by(*newest_first(table)).limit(limit)


_NEWEST = func.coalesce(runs.c.started_at, runs.c.queued_at)
_NEWEST_FIRST = newest_first(runs)

# Between a job's newest outcomes in the one text the store joins them into: outcomes are words.
_OUTCOMES_JOINED_BY = ","


@dataclass(frozen=True)
class LedgerSummary:
    last_attempt: LastAttempt | None
    """The last finished attempt (of a job never synced: the newest attempt, running or not)."""
    recent_outcomes: list[str]
    """The newest :data:`RECENT` outcomes, newest first, ``missed`` and ``skipped`` included."""
    last_success: datetime | None


def list_schedules(
    connection: Connection, names: Collection[str] | None = None, *, module: str | None = None
) -> dict[str, ScheduleRecord]:
    query = _SCHEDULE_ROWS
    if module is not None:
        query = query.where(schedules.c.module == module)
    query, keep = _scoped(query, names)
    made = (ScheduleRecord(*row) for row in connection.execute(query))
    return {record.job_name: record for record in made if keep is None or record.job_name in keep}


# A plain row in the order of the record's fields: much cheaper to make one from than a mapping.
_SCHEDULE_ROWS = select(*[schedules.c[field.name] for field in fields(ScheduleRecord)])


def _scoped(
    query: Select[Any], names: Collection[str] | None
) -> tuple[Select[Any], set[str] | None]:
    """``query`` narrowed to ``names`` and the names to keep: a long list is not sent."""
    if names is None:
        return query, None
    if len(names) <= _NAMED_AT_MOST:
        return query.where(schedules.c.job_name.in_(sorted(names))), None
    return query, set(names)


def summary_schedules(connection: Connection) -> dict[str, ScheduleSummary]:
    query = select(*[schedules.c[name] for name in ScheduleSummary._fields])
    make = ScheduleSummary._make
    return {row[0]: make(row) for row in connection.execute(query)}


def ledger_summaries(
    connection: Connection, names: Collection[str] | None = None, *, recent: bool = True
) -> dict[str, LedgerSummary]:
    """The :class:`LedgerSummary` of every scheduled job, or of each of ``names``: the
    scheduled ones in one statement, jobs without a row (never synced) one by one. Without
    ``recent``, no newest outcomes (the costliest question) are read."""
    query = _last_attempts(connection)
    if recent:
        query = query.add_columns(_newest_outcomes(connection))
    query, keep = _scoped(query, names)
    found: dict[str, LedgerSummary] = {}
    for row in connection.execute(query):
        if keep is None or row[0] in keep:
            found[str(row[0])] = LedgerSummary(
                LastAttempt(*row[2:_LAST_ATTEMPT_END]) if None not in row[2:4] else None,
                _split_outcomes(row[-1]) if recent and row[-1] is not None else [],
                row[1] if isinstance(row[1], datetime) else None,
            )
    for name in set(names or ()) - set(found):  # its newest attempt, outcomes, success
        tried = _job_runs(connection, name, runs.c.outcome.not_in(NOT_ATTEMPTS), limit=1)
        newest = newest_runs(connection, name)
        best = select(func.max(runs.c.finished_at)).where(
            runs.c.job_name == name, runs.c.outcome == "succeeded"
        )
        found[name] = LedgerSummary(
            LastAttempt.of(tried[0]) if tried else None,
            [run.outcome for run in newest],
            connection.execute(best).scalar(),
        )
    return dict(sorted(found.items()))


def newest_outcomes(connection: Connection) -> dict[str, list[str]]:
    """The newest :data:`RECENT` outcomes of every scheduled job with any, in one statement."""
    query = select(schedules.c.job_name, _newest_outcomes(connection))
    return {name: _split_outcomes(joined) for name, joined in connection.execute(query) if joined}


def newest_runs(connection: Connection, name: str) -> list[RunRecord]:
    """The job's newest :data:`RECENT` ledger rows (queued retries left out), newest first."""
    return _job_runs(connection, name, runs.c.outcome != PENDING, limit=RECENT)


def ledger_page(
    connection: Connection, name: str, limit: int, outcome: str | None, offset: int
) -> list[RunRecord]:
    """Up to ``limit`` of the job's rows, newest first, after ``offset``, of ``outcome``."""
    where = [runs.c.outcome == outcome] if outcome is not None else []
    return _job_runs(connection, name, *where, limit=limit, offset=offset)


def running_runs(connection: Connection, name: str | None = None) -> list[RunRecord]:
    """Runs still running (by index on outcome), oldest first; of job ``name`` if given."""
    query = select(runs).where(runs.c.outcome == RUNNING)
    if name is not None:
        query = query.where(runs.c.job_name == name)
    return read_runs(connection, query.order_by(runs.c.started_at))


def window_runs(
    connection: Connection, name: str, since: datetime, until: datetime
) -> tuple[list[RunRecord], list[RunRecord]]:
    """The job's rows started (or queued) in [since, until], oldest first (the newest
    :data:`_WINDOW_RUNS` at most), and its newest :data:`_RECENT_FAILURES` failed runs."""
    window = _job_runs(connection, name, _NEWEST.between(since, until), limit=_WINDOW_RUNS)
    newest = (runs.c.finished_at.desc(),)
    failed = runs.c.outcome.in_(FAILED)
    return window[::-1], _job_runs(connection, name, failed, limit=_RECENT_FAILURES, order=newest)


def get_schedule(connection: Connection, job_name: str) -> ScheduleRecord | None:
    row = connection.execute(_SCHEDULE_ROWS.where(schedules.c.job_name == job_name)).first()
    return ScheduleRecord(*row) if row is not None else None


def get_run(connection: Connection, run_id: str, *, for_update: bool = False) -> RunRecord | None:
    """The run; ``for_update`` locks it against a concurrent operator action (SQLite's write
    lock holds the whole file)."""
    query = select(runs).where(runs.c.id == run_id)
    found = read_runs(connection, query.with_for_update() if for_update else query)
    return found[0] if found else None


def stored_job_names(connection: Connection, names: Collection[str] | None = None) -> set[str]:
    """The job names the store knows, from its schedules and its ledger: those of ``names``, by
    index, or every one (a scan of an index: for suggestions after a name was not found)."""
    if names is None:
        every = union(select(schedules.c.job_name), select(runs.c.job_name))
        return {str(name) for name in connection.execute(every).scalars()}
    rows = select(schedules.c.job_name).where(schedules.c.job_name.in_(list(names)))
    known = {str(name) for name in connection.execute(rows).scalars()}
    for name in set(names) - known:
        ledger = select(runs.c.id).where(runs.c.job_name == name).limit(1)
        if connection.execute(ledger).first() is not None:
            known.add(name)
    return known


def _newest_outcomes(connection: Connection) -> ColumnElement[Any]:
    """The newest :data:`RECENT` outcomes of the schedule row's job, newest first, joined (NULL
    without a row), as a column over ``schedules``: one short text per job, not a row per
    outcome. SQLite (before 3.44) cannot be told the aggregate's order, but the subquery's LIMIT
    keeps it from being flattened, so rows reach ``group_concat`` in the index's order."""
    inner = runs.alias("inner_runs")
    same_job = inner.c.job_name == schedules.c.job_name
    newest = (
        newest_rows(inner, same_job, inner.c.outcome != PENDING, limit=RECENT)
        .correlate(schedules)
        .subquery("newest")
    )
    joined = database(connection).joined(
        newest.c.outcome, _OUTCOMES_JOINED_BY, *newest_first(newest)
    )
    return select(joined).correlate(schedules).scalar_subquery().label("newest_outcomes")


def _split_outcomes(joined: object) -> list[str]:
    return str(joined).split(_OUTCOMES_JOINED_BY)


def _last_attempts(connection: Connection) -> Select[Any]:
    """(job, last success, then :class:`LastAttempt`'s columns, all None without one) of every
    scheduled job: the schedule row says which run it was and how it ended (recorded with the
    run), its ledger row (found by its id) the host, error type and backfill."""
    row = schedules.c
    found: Any
    if database(connection).lateral:
        # A lateral subquery with its LIMIT is probed by the run's id, one index lookup a
        # job; a plain join is planned as a hash join over the whole ledger.
        found = (
            select(runs.c.host_id, runs.c.error_type, runs.c.backfill_id)
            .where(runs.c.id == row.last_run_id)
            .limit(1)
            .lateral("last_run")
        )
        joined: Any = schedules.outerjoin(found, true())
    else:
        found = runs
        joined = schedules.outerjoin(runs, runs.c.id == row.last_run_id)
    return select(
        row.job_name,
        row.last_success_at,
        row.last_run_id,
        row.last_outcome,
        found.c.host_id,
        row.last_started_at,
        row.last_finished_at,
        found.c.error_type,
        row.last_error,
        found.c.backfill_id,
    ).select_from(joined)


def read_runs(connection: Connection, query: Select[Any]) -> list[RunRecord]:
    return [RunRecord.from_row(row) for row in connection.execute(query).mappings()]


def _job_runs(
    connection: Connection,
    name: str,
    *where: ColumnElement[bool],
    limit: int,
    offset: int | None = None,
    order: Sequence[ColumnElement[Any]] = _NEWEST_FIRST,
) -> list[RunRecord]:
    query = select(runs).where(runs.c.job_name == name, *where).order_by(*order)
    return read_runs(connection, query.limit(limit).offset(offset))


def runs_by_id(
    connection: Connection,
    run_ids: Collection[str] = (),
    *,
    prefix: str | None = None,
    limit: int | None = None,
) -> dict[str, RunRecord]:
    """The runs of ``run_ids`` that exist, newest finish first; or with ``prefix`` (lower-case
    hex), up to ``limit`` runs whose id starts with it, by id: a range, not ``LIKE``, which
    PostgreSQL's index on a column of a non-C collation cannot serve."""
    if prefix is None:
        if not run_ids:
            return {}
        query = (
            select(runs)
            .where(runs.c.id.in_(sorted(set(run_ids))))
            .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
        )
    else:
        query = select(runs).where(runs.c.id >= prefix).order_by(runs.c.id)
        # Below the least hex text above every one starting with ``prefix`` (none for ff...f).
        if kept := prefix.rstrip("f"):
            query = query.where(runs.c.id < kept[:-1] + f"{int(kept[-1], 16) + 1:x}")
    return {run.id: run for run in read_runs(connection, query.limit(limit))}
