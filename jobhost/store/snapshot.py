"""What the report, the health checks and each dashboard page or API answer read of the store,
each in one read-only transaction, so what they show side by side was true at once: read at the
database's own time (the machine's on SQLite), so a host's ``last_seen_at`` and the instant it is
compared with come from one clock. The reads are :mod:`jobhost.store.reports`', each bounded by
an index.

**The census** counts the catalog rather than reading it whole: at 10,000 jobs, decoding every
schedule row only to ask which jobs are critical and which catalog version the store holds was
most of ``jobhost health``. The rows of the jobs that matter are then read whole, in the same
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TypeVar

from sqlalchemy import func, select, union
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock, SystemClock
from jobhost.records import (
    BackfillRecord,
    ChangeSearch,
    Dropped,
    JobChange,
    LastAttempt,
    LogLine,
    RunRecord,
    ScheduleRecord,
    ScheduleRow,
    StateEntry,
    StoreSnapshot,
    StreakRange,
)
from jobhost.store import reports
from jobhost.store.backfills import last_outcomes, list_backfills
from jobhost.store.engine import database, database_now, reading
from jobhost.store.failures import (
    RETRY,
    failing_jobs,
    logged_changes,
    retry_links,
    streak_range,
)
from jobhost.store.ledger import group_summaries, list_hosts
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.runlogs import last_lines, read_lines
from jobhost.store.runtime import deletions, search_changes
from jobhost.store.schema import IS_RUNNING, job_state, runs, schedules

__all__ = [
    "Census",
    "JobPage",
    "JobRead",
    "RunPage",
    "catalog_versions",
    "job_page",
    "read_snapshot",
    "run_pages",
    "take_census",
]


_T = TypeVar("_T")


def read_snapshot(
    engine: Engine,
    names: Collection[str] = (),
    clock: Clock | None = None,
    *,
    only: str | None = None,
    jobs_of: Callable[[Census], Collection[str]] | None = None,
    recent: bool = True,
    apart: bool = False,
    whole: bool = True,
    failing: bool = False,
) -> StoreSnapshot:
    """Schedules, hosts, and for every job in ``names`` or the store: its ledger summary.

    ``only``: just that job. ``jobs_of``: only the jobs it names given the :class:`Census` (the
    health check's critical jobs and expired leases). Without ``recent``, no ledger read at all:
    each last attempt is its schedule row's (no host, error type or backfill) and
    ``recent_outcomes`` stays empty. ``apart``: see :func:`_whole_ledger`. Without ``whole``,
    rows as the dashboard's summary reads them. ``failing``: the failing jobs too (the metrics).
    """
    with reading(engine) as connection:
        now = database_now(connection, clock or SystemClock())
        rows: Mapping[str, ScheduleRow]
        chosen: Collection[str] | None = [only] if only is not None else None
        if chosen is None and jobs_of is not None:
            chosen = jobs_of(take_census(connection, now))
        if chosen is not None:
            rows = reports.list_schedules(connection, chosen)
            summaries = reports.ledger_summaries(connection, chosen)
        else:
            ledger = _whole_ledger(engine, connection, apart=apart) if recent else None
            rows = (reports.list_schedules if whole else reports.summary_schedules)(connection)
            extra = set(names) - set(rows)
            if ledger is not None:
                summaries = ledger()
            else:  # each last finished attempt and last success as the schedule row records them
                summaries = {
                    name: reports.LedgerSummary(LastAttempt.recorded(row), [], row.last_success_at)
                    for name, row in rows.items()
                }
            if extra:
                summaries.update(reports.ledger_summaries(connection, extra))
        snapshot = StoreSnapshot(
            now=now,
            schedules=rows,
            hosts=list_hosts(connection),
            groups=group_summaries(connection, now),
            failing=failing_jobs(connection) if failing else {},
        )
        removed = [n for n, r in rows.items() if r.orphaned and r.trigger_source == "api"]
        if removed:
            snapshot.deleted.update(deletions(connection, removed))
        for name, summary in summaries.items():
            if summary.last_attempt is not None:
                snapshot.last_runs[name] = summary.last_attempt
            snapshot.recent_outcomes[name] = summary.recent_outcomes
            if summary.last_success is not None:
                snapshot.last_success[name] = summary.last_success
        # Oldest first: the newest running attempt is the last one.
        for run in reports.running_runs(connection, only):
            snapshot.running.setdefault(run.job_name, []).append(run)
            snapshot.last_runs[run.job_name] = LastAttempt.of(run)
            if run.lease_expires_at is not None and run.lease_expires_at < now:
                snapshot.expired_runs.setdefault(run.job_name, []).append(run)
        return snapshot


def _whole_ledger(
    engine: Engine, connection: Connection, *, apart: bool
) -> Callable[[], dict[str, reports.LedgerSummary]]:
    """The whole catalog's ledger summaries, collected by calling the result; ``apart`` (for a
    command, not a host's pool) on PostgreSQL, read on connections of their own while
    ``connection`` reads the schedules: at READ COMMITTED each statement sees its own start."""
    if not (apart and database(engine).server):
        return lambda: reports.ledger_summaries(connection)
    pool = ThreadPoolExecutor(2, thread_name_prefix="jobhost-ledger")
    try:
        lean = pool.submit(_apart, engine, partial(reports.ledger_summaries, recent=False))
        outcomes = pool.submit(_apart, engine, reports.newest_outcomes)
    finally:
        pool.shutdown(wait=False)

    def collected() -> dict[str, reports.LedgerSummary]:
        summaries, newest = lean.result(), outcomes.result()
        return {
            name: reports.LedgerSummary(
                found.last_attempt, newest.get(name, []), found.last_success
            )
            for name, found in summaries.items()
        }

    return collected


def _apart(engine: Engine, read: Callable[[Connection], _T]) -> _T:
    with reading(engine) as connection:
        return read(connection)


@dataclass(frozen=True)
class JobRead:
    """What :func:`job_page` reads of job ``name``, each part only when asked for: ``history``
    rows (after the newest ``offset``, of ``outcome``) with their last log ``lines``; the page's
    ``window`` (its runs and counts in ``slices``, recent failures, changes and backfills); its
    failure ``streak`` to replay (a walk back: for a failing job only); the last outcome of
    each of its ``occurrences`` in [start, end); and up to ``state`` keys of its state, by key."""

    name: str
    history: int = 0
    outcome: str | None = None
    offset: int = 0
    lines: int = 0
    window: tuple[datetime, datetime] | None = None
    slices: int = 1
    streak: bool = False
    occurrences: tuple[datetime, datetime] | None = None
    state: int = 0


@dataclass(frozen=True)
class JobPage:
    history: list[RunRecord] = field(default_factory=list)
    lines: dict[str, list[LogLine | Dropped]] = field(default_factory=dict)
    streak: StreakRange | None = None
    outcomes: dict[datetime, str] = field(default_factory=dict)
    window: list[RunRecord] = field(default_factory=list)
    failures: list[RunRecord] = field(default_factory=list)
    counts: list[dict[str, int]] = field(default_factory=list)
    changes: list[JobChange] = field(default_factory=list)
    backfills: list[BackfillRecord] = field(default_factory=list)
    state: list[StateEntry] = field(default_factory=list)


@dataclass(frozen=True)
class RunPage:
    run: RunRecord
    attempts: list[RunRecord]
    lines: list[LogLine | Dropped]
    retry_of: RunRecord | None = None
    """The run an operator's retry retried."""


def job_page(connection: Connection, read: JobRead) -> JobPage:
    name, window = read.name, read.window
    history = []
    if read.history:
        history = reports.ledger_page(connection, name, read.history, read.outcome, read.offset)
    in_window, failures = reports.window_runs(connection, name, *window) if window else ([], [])
    return JobPage(
        history,
        last_lines(connection, [run.id for run in history], count=read.lines) if read.lines else {},
        streak_range(connection, name) if read.streak else None,
        last_outcomes(connection, name, *read.occurrences) if read.occurrences else {},
        in_window,
        failures,
        outcome_counts(connection, *window, read.slices, job=name) if window else [],
        search_changes(connection, ChangeSearch(job=name), 10) if window else [],
        list_backfills(connection, job=name, limit=5) if window else [],
        _state(connection, name, read.state) if read.state else [],
    )


def _state(connection: Connection, job_name: str, limit: int) -> list[StateEntry]:
    columns = (job_state.c.key, job_state.c.value, job_state.c.updated_at)
    rows = connection.execute(
        select(*columns, job_state.c.fencing_token)
        .where(job_state.c.job_name == job_name)
        .order_by(job_state.c.key)
        .limit(limit)
    )
    return [StateEntry(str(k), str(v), at, int(token)) for k, v, at, token in rows]


def run_pages(
    connection: Connection,
    run_ids: Collection[str] = (),
    *,
    prefix: str | None = None,
    limit: int | None = None,
    lines: int = 0,
    after: int = 0,
    attempts: bool = False,
) -> dict[str, RunPage]:
    """The runs of ``run_ids``, or whose id starts with ``prefix``, each with up to ``lines`` of
    its log lines numbered above ``after`` and, with ``attempts``, its attempts and the run it
    retried. A run is read before its lines: one seen finished has all its lines stored."""
    pages: dict[str, RunPage] = {}
    for key, run in reports.runs_by_id(connection, run_ids, prefix=prefix, limit=limit).items():
        shown = read_lines(connection, run.id, after=after, limit=lines) if lines else []
        if not attempts:
            pages[key] = RunPage(run, [], shown)
            continue
        # With its attempts comes the run an operator's retry retried.
        links = _links(connection, run) if run.source == "retry" else []
        old = next((old for old, new in links if new == run.id), None)
        retried = reports.get_run(connection, old) if old is not None else None
        pages[key] = RunPage(run, _attempts(connection, run), shown, retried)
    return pages


# An operator's retry writes a change-log entry naming the run retried (``before``) and the new
# run (``after``): the link between them. A manual run has no occurrence to gather its attempts
# by; its retries share its idempotency key, ``JOB:manual:ID``, naming the first attempt.


def _attempts(connection: Connection, run: RunRecord) -> list[RunRecord]:
    if run.occurrence is not None:
        same = (runs.c.job_name == run.job_name, runs.c.occurrence == run.occurrence)
        return reports.read_runs(connection, select(runs).where(*same).order_by(runs.c.attempt))
    key, prefix = run.idempotency_key or "", f"{run.job_name}:manual:"
    first = run
    if key.startswith(prefix) and key[len(prefix) :] != run.id:
        first = reports.get_run(connection, key[len(prefix) :]) or run
    chain = [first.id]
    for old, new in _links(connection, first):
        if old in chain and new not in chain:
            chain.append(new)
    found = reports.runs_by_id(connection, chain)
    found.setdefault(run.id, run)
    return sorted(found.values(), key=lambda r: (r.attempt, r.queued_at))


def _links(connection: Connection, since: RunRecord) -> Sequence[tuple[str, str]]:
    return retry_links(logged_changes(connection, [since.job_name], [RETRY], since.queued_at))


@dataclass(frozen=True)
class Census:
    """The store's catalog at ``now``, read within an open transaction."""

    now: datetime
    declared: list[tuple[str, str | None]]
    """(name, stored declaration) of every live (not orphaned) job, by name."""
    versions: dict[str, int]
    held: list[str]
    """The jobs holding a lease that expired before ``now``: their own, or a running run's."""
    _connection: Connection

    def rows(self, names: Collection[str]) -> dict[str, ScheduleRecord]:
        return reports.list_schedules(self._connection, names) if names else {}


def take_census(connection: Connection, now: datetime) -> Census:
    declared = select(schedules.c.job_name, schedules.c.declaration).where(
        schedules.c.orphaned.is_(False)
    )
    leases = select(schedules.c.job_name).where(
        schedules.c.lease_owner.is_not(None), schedules.c.lease_expires_at < now
    )
    expired = select(runs.c.job_name).where(IS_RUNNING, runs.c.lease_expires_at < now)
    held = {str(name) for name in connection.execute(union(leases, expired)).scalars()}
    return Census(
        now=now,
        declared=sorted((str(name), text) for name, text in connection.execute(declared)),
        versions=catalog_versions(connection),
        held=sorted(held),
        _connection=connection,
    )


def catalog_versions(connection: Connection) -> dict[str, int]:
    """How many live rows each catalog version stamps (by a sync), runtime jobs aside."""
    query = (
        select(schedules.c.catalog_version, func.count())
        .where(
            schedules.c.catalog_version.is_not(None),
            schedules.c.orphaned.is_(False),
            schedules.c.trigger_source != "api",
        )
        .group_by(schedules.c.catalog_version)
    )
    return {str(version): int(count) for version, count in connection.execute(query)}
