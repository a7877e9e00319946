"""What the report, the health checks and each dashboard page or API answer read of the store,
each in one read-only transaction, so what they show side by side was true at once.

The report's and the health checks' snapshot is read at the database's own time (the machine's
on SQLite), so a host's ``last_seen_at`` and the instant it is compared with come from one
clock: in one read-only transaction, one snapshot on SQLite; on PostgreSQL (READ COMMITTED)
each statement sees the store as of its own start, and the whole catalog's ledger summaries are
read beside the rest on a second connection. The reads are :mod:`jobhost.store.reports`', each
bounded by an index. A job's last attempt is the one its schedule row records finished, or its
newest running one.

**The census** is the store's catalog counted, not read whole: what a question about every
job needs. At 10,000 jobs, decoding every schedule row (33 columns, a dozen of them times)
only to ask which jobs are critical and which catalog version the store holds was most of
``jobhost health``. A :class:`Census` asks for the few columns those questions need and leaves
the counting to the database; the rows of the jobs that matter are then read whole, in the
same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from sqlalchemy import func, select
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
    StoreSnapshot,
    StreakRange,
)
from jobhost.store import reports as store_reports
from jobhost.store.backfills import list_backfills
from jobhost.store.engine import database, database_now, reading
from jobhost.store.failures import RETRY, logged_changes, retry_links, streak_range
from jobhost.store.group_limits import group_summaries
from jobhost.store.hosts import list_hosts
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.reports import (
    LedgerSummary,
    attempts_of,
    get_run,
    ledger_page,
    list_schedules,
    recent_failures,
    runs_between,
    runs_by_id,
)
from jobhost.store.runlogs import read_lines
from jobhost.store.runtime import deletions, search_changes
from jobhost.store.schema import IS_RUNNING, runs, schedules

__all__ = [
    "Census",
    "JobPage",
    "RunPage",
    "catalog_versions",
    "job_page",
    "read_snapshot",
    "run_page",
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
) -> StoreSnapshot:
    """Schedules, hosts, and for every job in ``names`` or the store: its ledger summary.

    With ``only``, just that job is read (its row, its runs), whatever ``names`` says. With
    ``jobs_of``, only the jobs it names, given the store's :class:`Census` (taken in the same
    transaction), have their row and ledger read, and all running runs (the health check reads
    the critical jobs and those holding an expired lease). Without ``recent``, the whole
    catalog's newest outcomes are not read (``recent_outcomes`` stays empty), nor the ledger at
    all: each last finished attempt is its schedule row's, without its host, error type and
    backfill (None; the one-line text shows none of them). With ``apart``,
    PostgreSQL reads the whole catalog's ledger summaries on connections of their own (for a
    command: a host's pool keeps its connections for the firing loop). Without ``whole``, the
    whole catalog's rows are read as the dashboard's summary reads them (ScheduleSummary).
    """
    with reading(engine) as connection:
        now = database_now(connection, clock or SystemClock())
        rows: Mapping[str, ScheduleRow]
        chosen: Collection[str] | None = [only] if only is not None else None
        if chosen is None and jobs_of is not None:
            chosen = jobs_of(take_census(connection, now))
        if chosen is not None:
            rows = store_reports.list_schedules(connection, chosen)
            summaries = store_reports.ledger_summaries(connection, chosen)
        else:
            ledger = _whole_ledger(engine, connection, apart=apart) if recent else None
            rows = (
                store_reports.list_schedules(connection)
                if whole
                else store_reports.summary_schedules(connection)
            )
            extra = set(names) - set(rows)
            if ledger is not None:
                summaries = ledger()
            else:  # each last finished attempt and last success as the schedule row records them
                summaries = {
                    name: LedgerSummary(LastAttempt.recorded(row), [], row.last_success_at)
                    for name, row in rows.items()
                }
            if extra:
                summaries.update(store_reports.ledger_summaries(connection, extra))
        running = store_reports.running_runs(connection, only)
        return _snapshot(connection, now, rows, summaries, running)


def _whole_ledger(
    engine: Engine, connection: Connection, *, apart: bool
) -> Callable[[], dict[str, LedgerSummary]]:
    """The whole catalog's ledger summaries, collected by calling the result. ``apart`` on
    PostgreSQL, the server answers their per-job probes (most of a report's wait) on
    connections of their own while ``connection`` reads the schedules: at READ COMMITTED each
    statement sees the store as of its own start, on one connection or three. Otherwise (and on
    SQLite, which answers in this process, where a second thread only shares the same cores)
    they are read when collected, on ``connection``."""
    if not (apart and database(engine).server):
        return lambda: store_reports.ledger_summaries(connection)
    pool = ThreadPoolExecutor(2, thread_name_prefix="jobhost-ledger")
    try:
        # The newest outcomes and the rest, each on a connection of its own: the server answers
        # both at once.
        lean = pool.submit(_apart, engine, partial(store_reports.ledger_summaries, recent=False))
        outcomes = pool.submit(_apart, engine, store_reports.newest_outcomes)
    finally:
        pool.shutdown(wait=False)

    def collected() -> dict[str, LedgerSummary]:
        summaries, newest = lean.result(), outcomes.result()
        return {
            name: LedgerSummary(found.last_attempt, newest.get(name, []), found.last_success)
            for name, found in summaries.items()
        }

    return collected


def _apart(engine: Engine, read: Callable[[Connection], _T]) -> _T:
    with reading(engine) as connection:
        return read(connection)


def _snapshot(
    connection: Connection,
    now: datetime,
    rows: Mapping[str, ScheduleRow],
    summaries: Mapping[str, LedgerSummary],
    running: Sequence[RunRecord],
) -> StoreSnapshot:
    """The schedule rows with the hosts, the groups, the API's removals, the jobs' ledger
    ``summaries`` and the ``running`` runs (oldest first)."""
    snapshot = StoreSnapshot(
        now=now,
        schedules=rows,
        hosts=list_hosts(connection),
        groups=group_summaries(connection, now),
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
    for run in running:  # oldest first: the newest running attempt is the last one
        snapshot.running.setdefault(run.job_name, []).append(run)
        snapshot.last_runs[run.job_name] = LastAttempt.of(run)
        if run.lease_expires_at is not None and run.lease_expires_at < now:
            snapshot.expired_runs.setdefault(run.job_name, []).append(run)
    return snapshot


@dataclass(frozen=True)
class JobPage:
    window: list[RunRecord]
    """Runs between ``since`` and ``until``."""
    failures: list[RunRecord]
    history: list[RunRecord]
    """The page of the job's history asked for."""
    counts: list[dict[str, int]]
    """Runs finished in each slice of the window, by outcome."""
    changes: list[JobChange]
    """The newest changes, newest first."""
    backfills: list[BackfillRecord]
    """The job's newest backfills."""
    streak: StreakRange | None
    """The failure streak to replay, when it was asked for and the job is failing."""


@dataclass(frozen=True)
class RunPage:
    run: RunRecord
    attempts: list[RunRecord]
    lines: list[LogLine | Dropped]
    retry_of: RunRecord | None = None
    """The run an operator's retry retried."""


def job_page(
    connection: Connection,
    name: str,
    since: datetime,
    until: datetime,
    *,
    slices: int,
    history: int,
    outcome: str | None,
    offset: int,
    now: datetime | None = None,
    streak: bool = False,
) -> JobPage:
    """The job page's rows: the window's runs and outcome counts (in ``slices``), recent
    failures, ``history`` rows of its history from ``offset`` (of ``outcome`` when given),
    its newest changes and backfills, and with ``streak`` its failure streak (a walk back
    through its newest attempts: for a failing job only). With ``now`` (the store's clock) the
    counts' closed minutes are read from their kept counts."""
    return JobPage(
        runs_between(connection, name, since, until),
        recent_failures(connection, name),
        ledger_page(connection, name, limit=history, outcome=outcome, offset=offset)[0],
        outcome_counts(connection, since, until, slices, job=name, now=now),
        search_changes(connection, ChangeSearch(job=name), 10),
        list_backfills(connection, job=name, limit=5),
        streak_range(connection, name) if streak else None,
    )


def run_page(
    connection: Connection, run_id: str, *, after: int = 0, lines: int, attempts: bool = True
) -> RunPage | None:
    """The run, up to ``lines`` of its log lines numbered above ``after``, and (with
    ``attempts``) its attempts and the run it retried; None for an unknown run. The run is read
    first: one seen finished has all its lines stored."""
    run = get_run(connection, run_id)
    if run is None:
        return None
    found = read_lines(connection, run_id, after=after, limit=lines)
    if not attempts:
        return RunPage(run, [], found)
    every = (
        attempts_of(connection, run)
        if run.occurrence is not None
        else _manual_attempts(connection, run)
    )
    return RunPage(run, every, found, _retried_run(connection, run))


# -- which run an operator's retry retried, and every attempt at a manual run's work --------
#
# An operator's retry writes a change-log entry naming the run retried (``before``) and the new
# run (``after``): that is the link, read from the job's ``retry`` entries (the change log's
# index on job). A manual run has no occurrence to gather its attempts by; its retries share its
# idempotency key, ``JOB:manual:ID``, which names the first attempt, and the change log names
# the retries since. Reads cost the job's retry entries, never its ledger.


def _retried_run(connection: Connection, run: RunRecord) -> RunRecord | None:
    """The run ``run`` is an operator's retry of; None when it is no such retry (a first
    attempt, a retry the job's policy queued)."""
    if run.source != "retry":
        return None
    for old, new in _links(connection, run):
        if new == run.id:
            return get_run(connection, old)
    return None


def _manual_attempts(connection: Connection, run: RunRecord) -> list[RunRecord]:
    """Every attempt at the manual run ``run``'s work (itself and its retries), first first."""
    first = _first_attempt(connection, run)
    chain = [first.id]
    links = _links(connection, first)
    for old, new in links:
        if old in chain and new not in chain:
            chain.append(new)
    found = runs_by_id(connection, chain)
    found.setdefault(run.id, run)
    return sorted(found.values(), key=lambda r: (r.attempt, r.queued_at))


def _first_attempt(connection: Connection, run: RunRecord) -> RunRecord:
    key = run.idempotency_key or ""
    prefix = f"{run.job_name}:manual:"
    if key.startswith(prefix) and key[len(prefix) :] != run.id:
        return get_run(connection, key[len(prefix) :]) or run
    return run


def _links(connection: Connection, since: RunRecord) -> Sequence[tuple[str, str]]:
    return retry_links(logged_changes(connection, [since.job_name], [RETRY], since.queued_at))


@dataclass(frozen=True)
class Census:
    """The store's catalog at ``now``, read within an open transaction."""

    now: datetime
    declared: list[tuple[str, str | None]]
    """(name, stored declaration) of every live (not orphaned) job, by name."""
    versions: dict[str, int]
    """How many live rows each catalog version stamps (see :func:`catalog_versions`)."""
    held: list[str]
    """The jobs holding a lease that expired before ``now``: their own, or a running run's."""
    _connection: Connection

    def rows(self, names: Collection[str]) -> dict[str, ScheduleRecord]:
        """The whole schedule rows of ``names``, in the same transaction."""
        return list_schedules(self._connection, names) if names else {}


def take_census(connection: Connection, now: datetime) -> Census:
    declared = select(schedules.c.job_name, schedules.c.declaration).where(
        schedules.c.orphaned.is_(False)
    )
    leases = select(schedules.c.job_name).where(
        schedules.c.lease_owner.is_not(None), schedules.c.lease_expires_at < now
    )
    expired = select(runs.c.job_name).where(IS_RUNNING, runs.c.lease_expires_at < now)
    held = {str(name) for name in connection.execute(leases).scalars()}
    held |= {str(name) for name in connection.execute(expired).scalars()}
    return Census(
        now=now,
        declared=sorted((str(name), text) for name, text in connection.execute(declared)),
        versions=catalog_versions(connection),
        held=sorted(held),
        _connection=connection,
    )


def catalog_versions(connection: Connection) -> dict[str, int]:
    """How many live rows each catalog version stamps, runtime jobs aside (a sync stamps the
    version on the rows of the catalog it applied; a runtime job keeps the one it was made
    under)."""
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
