"""Failures: the failures list read a page at a time, whether each failure is resolved, and
each job's failure streak.

**Pages.** Each failed outcome is its own stream read by index with a LIMIT, merged here. A page
continues after a key (finished time, run id), never an offset, so the thousandth page costs
what the first does. A search by error text, or a page of open failures, looks at no more than
:data:`SEARCH_SCAN` rows of each stream (or :data:`OPEN_SCAN` failures) and says how far back it
looked.

**Resolution** is derived, never stored: a failure is resolved when a later run of the same job
and occurrence succeeded (for a manual run, a succeeded retry of it, followed through the change
log's ``retry`` entries), or by an operator's ``ack`` entry in the change log.

**Streaks.** The failures list and the overview count a job's failed attempts in a row
(:func:`failure_streaks`). The alerts, the gauges and the replay of a streak count occurrences
whose last attempt failed, counting back until a success (manual runs take no part), reading at
most :data:`SCAN_ROWS` rows; the jobs failing now are read from candidates only: those whose last
run failed or was not a scheduled one.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import takewhile
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, func, literal, or_, select, union_all
from sqlalchemy.engine import Connection

from jobhost.records import (
    FAILED,
    NOT_ATTEMPTS,
    RUNNING,
    STREAK_LIMIT,
    Failing,
    FailureFilter,
    FailureKey,
    Resolution,
    RunRecord,
    StreakRange,
)
from jobhost.store.backfills import last_outcomes
from jobhost.store.reports import newest_first, newest_rows, read_runs
from jobhost.store.runtime import job_changes
from jobhost.store.schema import runs, schedules

__all__ = [
    "ACK",
    "OPEN_SCAN",
    "RETRY",
    "SCAN_ROWS",
    "SEARCH_SCAN",
    "FailurePage",
    "FailureRows",
    "failing_jobs",
    "failure_page",
    "failure_rows",
    "failure_streaks",
    "logged_changes",
    "resolutions",
    "retry_links",
    "streak_range",
]

SEARCH_SCAN = 20_000
"""Rows of each failed outcome a search by text examines for one page."""
OPEN_SCAN = 2_000
"""The most failures one page of open failures looks at."""
SCAN_ROWS = 400
"""The most attempts one job's streak reads."""

# The change-log actions of an operator acknowledging a failure, and retrying one run.
ACK = "ack"
RETRY = "retry"

_CHUNK = 200
_EVERY_FAILURE = FailureFilter()
_NEWEST_FINISH = (runs.c.finished_at.desc(), runs.c.id.desc())

_NOT_ATTEMPTS = (*NOT_ATTEMPTS, RUNNING)
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


@dataclass(frozen=True)
class FailureRows:
    stuck: list[RunRecord]
    page: FailurePage | None
    """None when the stuck runs fill the page."""
    resolved: dict[str, Resolution]
    streaks: dict[str, int]


def failure_rows(
    connection: Connection,
    now: datetime,
    *,
    limit: int = 0,
    where: FailureFilter = _EVERY_FAILURE,
    after: FailureKey | None = None,
    open_only: bool = True,
    streaks_of: Collection[str] = (),
) -> FailureRows:
    """Stuck runs first (on the first page, ``after`` None), then finished failures (open ones
    only, unless ``open_only`` is False), up to ``limit`` in all, with the streaks of their
    jobs and of ``streaks_of``'s (:func:`failure_streaks`)."""
    # Running runs whose lease expired or whose code ignored its cancellation, newest first.
    query = select(runs).where(
        runs.c.outcome == RUNNING,
        or_(runs.c.lease_expires_at < now, runs.c.error_type == "Stuck"),
    )
    if where.jobs is not None:
        query = query.where(_of_jobs(where.jobs))
    if where.text:
        query = query.where(_mentions(runs.c, where.text))
    query = query.order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(limit)
    stuck = read_runs(connection, query) if after is None and limit else []
    found: tuple[FailurePage | None, dict[str, Resolution]] = (None, {})
    if len(stuck) < limit:
        found = _resolved_page(
            connection, limit=limit - len(stuck), where=where, after=after, open_only=open_only
        )
    page, resolved = found
    jobs = {run.job_name for run in [*stuck, *(page.runs if page is not None else [])]}
    return FailureRows(stuck, page, resolved, failure_streaks(connection, {*jobs, *streaks_of}))


def failure_streaks(connection: Connection, names: Collection[str]) -> dict[str, int]:
    """Each job's failed attempts in a row, counting back from its newest finished attempt
    (up to :data:`STREAK_LIMIT`), a manual run's included. One statement per :data:`_CHUNK`
    jobs, each job's newest attempts read by index with their own LIMIT."""
    outcomes: dict[str, list[str]] = {name: [] for name in names}
    wanted = sorted(outcomes)
    for start in range(0, len(wanted), _CHUNK):
        newest = []
        for name in wanted[start : start + _CHUNK]:
            attempts = (runs.c.job_name == name, runs.c.outcome.not_in(_NOT_ATTEMPTS))
            read = newest_rows(runs, *attempts, limit=STREAK_LIMIT).subquery()
            # Numbered outside the LIMIT: the window sees the few rows read, not the ledger.
            position = func.row_number().over(order_by=newest_first(read)).label("position")
            newest.append(select(read.c.job_name, read.c.outcome, position))
        rows = connection.execute(union_all(*newest)).all()
        for row in sorted(rows, key=lambda row: row.position):
            outcomes[row.job_name].append(row.outcome)
    return {
        name: sum(1 for _ in takewhile(lambda outcome: outcome in FAILED, found))
        for name, found in outcomes.items()
    }


def failing_jobs(connection: Connection) -> dict[str, Failing]:
    # The candidates: jobs whose last run failed, or was not a scheduled one.
    query = (
        select(schedules.c.job_name, schedules.c.critical)
        .select_from(schedules.outerjoin(runs, runs.c.id == schedules.c.last_run_id))
        .where(or_(schedules.c.last_outcome.in_(FAILED), runs.c.source.in_(_NOT_SCHEDULED)))
        .order_by(schedules.c.job_name)
    )
    found = {}
    for name, critical in connection.execute(query).all():
        if streak := len(_failed_occurrences(connection, name)):
            found[str(name)] = Failing(streak, bool(critical))
    return found


def streak_range(connection: Connection, name: str) -> StreakRange | None:
    """The current failure streak of job ``name`` as a range to replay (None when not failing),
    with the count a backfill in mode ``failed`` over it picks: the number the preview lists."""
    occurrences = _failed_occurrences(connection, name)
    if not occurrences:
        return None
    first, last = occurrences[-1], occurrences[0]
    outcomes = last_outcomes(connection, name, first, last + timedelta(microseconds=1))
    failed = sum(1 for outcome in outcomes.values() if outcome in FAILED)
    return StreakRange(first, last, failed) if failed else None


def _failed_occurrences(connection: Connection, name: str) -> list[datetime]:
    """The occurrences of ``name``'s streak, newest first, each by its last attempt."""
    found: list[datetime] = []
    seen: datetime | None = None
    for occurrence, outcome in connection.execute(_STREAK_QUERY, {"job": name}):
        if occurrence == seen:
            continue
        seen = occurrence
        if outcome == "succeeded" or len(found) == STREAK_LIMIT:
            break
        found.append(occurrence)
    return found


@dataclass(frozen=True)
class FailurePage:
    runs: list[RunRecord]
    """Newest first."""
    next_key: FailureKey | None
    """Where the next page starts (older than this key); None when nothing older is left."""
    searched_to: FailureKey | None
    """Where a text search stopped looking (the page may hold fewer matches than asked)."""


def failure_page(
    connection: Connection,
    *,
    limit: int,
    where: FailureFilter = _EVERY_FAILURE,
    after: FailureKey | None = None,
) -> FailurePage:
    """Up to ``limit`` finished failed runs older than ``after`` that ``where`` keeps."""
    streams: list[list[tuple[FailureKey, RunRecord]]] = []
    frontier: FailureKey | None = None
    shared: list[ColumnElement[bool]] = [runs.c.finished_at.is_not(None)]
    if where.jobs is not None:
        shared.append(_of_jobs(where.jobs))
    if where.since is not None:
        shared.append(runs.c.finished_at >= where.since)
    if after is not None:
        # The first condition bounds the index range; the second breaks ties by id.
        shared += [
            runs.c.finished_at <= after.finished_at,
            or_(
                runs.c.finished_at < after.finished_at,
                and_(runs.c.finished_at == after.finished_at, runs.c.id < after.run_id),
            ),
        ]
    for outcome in FAILED:
        query = select(runs).where(runs.c.outcome == outcome, *shared).order_by(*_NEWEST_FINISH)
        if where.text:
            scanned = query.limit(SEARCH_SCAN).subquery()
            matched = (
                select(scanned)
                .where(_mentions(scanned.c, where.text))
                .order_by(scanned.c.finished_at.desc(), scanned.c.id.desc())
                .limit(limit + 1)
            )
            found = read_runs(connection, matched)
            last = connection.execute(
                query.with_only_columns(runs.c.finished_at, runs.c.id)
                .offset(SEARCH_SCAN - 1)
                .limit(1)
            ).first()
            if last is not None:
                bound = FailureKey(last[0], str(last[1]))
                frontier = bound if frontier is None else max(frontier, bound)
        else:
            found = read_runs(connection, query.limit(limit + 1))
        streams.append([(_key(run), run) for run in found])
    merged = heapq.merge(*streams, key=lambda pair: pair[0], reverse=True)
    kept = [pair for pair in merged if frontier is None or pair[0] >= frontier]
    page = [run for _, run in kept[:limit]]
    if len(kept) > limit:
        return FailurePage(page, _key(page[-1]), None)
    return FailurePage(page, frontier, frontier)


def _resolved_page(
    connection: Connection,
    *,
    limit: int,
    where: FailureFilter,
    after: FailureKey | None,
    open_only: bool,
) -> tuple[FailurePage, dict[str, Resolution]]:
    """The page, with how its resolved runs were resolved (by run id)."""
    if not open_only:
        page = failure_page(connection, limit=limit, where=where, after=after)
        return page, resolutions(connection, page.runs)
    kept: list[RunRecord] = []
    key, looked = after, 0
    while True:
        page = failure_page(
            connection, limit=min(_CHUNK, OPEN_SCAN - looked), where=where, after=key
        )
        resolved = resolutions(connection, page.runs)
        for run in page.runs:
            if run.id not in resolved:
                kept.append(run)
                if len(kept) == limit:
                    return FailurePage(kept, _key(run), None), {}
        looked += len(page.runs)
        if page.next_key is None or page.searched_to is not None:
            return FailurePage(kept, page.next_key, page.searched_to), {}
        key = page.next_key
        if looked >= OPEN_SCAN:
            return FailurePage(kept, key, key), {}


def _of_jobs(jobs: Collection[str]) -> ColumnElement[bool]:
    if len(jobs) == 1:
        return runs.c.job_name == next(iter(jobs))
    return runs.c.job_name.in_(sorted(jobs))


def _mentions(columns: Any, text: str) -> ColumnElement[bool]:
    """Whether the error type or message holds ``text``, case-insensitive."""
    found = func.lower(
        func.coalesce(columns.error_type, literal(""))
        + literal(" ")
        + func.coalesce(columns.error_message, literal(""))
    )
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return found.like(f"%{escaped}%", escape="\\")


def _key(run: RunRecord) -> FailureKey:
    assert run.finished_at is not None  # the streams read finished runs only
    return FailureKey(run.finished_at, run.id)


def resolutions(connection: Connection, failed: Sequence[RunRecord]) -> dict[str, Resolution]:
    if not failed:
        return {}
    jobs = {run.job_name for run in failed}
    oldest = min(run.finished_at or run.queued_at for run in failed)
    changes = logged_changes(connection, jobs, (ACK, RETRY), oldest)
    found: dict[str, Resolution] = {}
    for change in changes:
        if change.action == ACK and (run_id := _run_id(change.after)) is not None:
            found.setdefault(
                run_id, Resolution("acknowledged", change.actor, change.at, None, change.reason)
            )
    found.update(_by_occurrence(connection, [r for r in failed if r.id not in found]))
    manual = [r for r in failed if r.occurrence is None and r.id not in found]
    found.update(_by_retry_chain(connection, manual, changes))
    return found


def logged_changes(
    connection: Connection, jobs: Collection[str], actions: Collection[str], since: datetime
) -> list[Any]:
    query = (
        select(*[job_changes.c[n] for n in ("action", "actor", "at", "before", "after", "reason")])
        .where(
            job_changes.c.job_name.in_(sorted(jobs)),
            job_changes.c.action.in_(sorted(actions)),
            job_changes.c.at >= since,
        )
        .order_by(job_changes.c.id)
    )
    return list(connection.execute(query))


def _by_occurrence(connection: Connection, failed: Sequence[RunRecord]) -> dict[str, Resolution]:
    pairs = {(r.job_name, r.occurrence) for r in failed if r.occurrence is not None}
    if not pairs:
        return {}
    # Both columns by IN, not a row-value IN (SQLite scans the table for that): the cross
    # product's successes not asked for are never looked up.
    query = select(runs).where(
        runs.c.job_name.in_(sorted({job for job, _ in pairs})),
        runs.c.occurrence.in_(sorted({occurrence for _, occurrence in pairs})),
        runs.c.outcome == "succeeded",
    )
    successes: dict[tuple[str, datetime | None], list[RunRecord]] = {}
    for success in read_runs(connection, query):
        successes.setdefault((success.job_name, success.occurrence), []).append(success)
    found: dict[str, Resolution] = {}
    for run in failed:
        done = sorted(
            successes.get((run.job_name, run.occurrence), []),
            key=lambda success: success.finished_at or success.queued_at,
        )
        later = next((s for s in done if _after(s.finished_at, run.finished_at)), None)
        if later is not None:
            found[run.id] = _succeeded(later)
    return found


def _by_retry_chain(
    connection: Connection, manual: Sequence[RunRecord], changes: Iterable[Any]
) -> dict[str, Resolution]:
    if not manual:
        return {}
    retried: dict[str, list[str]] = {}
    for old, new in retry_links(c for c in changes if c.action == RETRY):
        retried.setdefault(old, []).append(new)
    chains: dict[str, list[str]] = {}
    for run in manual:  # each retry of it, and of those, oldest link first
        chain = chains[run.id] = []
        waiting = list(retried.get(run.id, []))
        while waiting:
            if (current := waiting.pop(0)) not in chain:
                chain.append(current)
                waiting.extend(retried.get(current, []))
    wanted = sorted({run_id for chain in chains.values() for run_id in chain})
    if not wanted:
        return {}
    query = select(runs).where(runs.c.id.in_(wanted), runs.c.outcome == "succeeded")
    succeeded = {success.id: success for success in read_runs(connection, query)}
    firsts = {
        run_id: [succeeded[c] for c in chain if c in succeeded] for run_id, chain in chains.items()
    }
    return {run_id: _succeeded(found[0]) for run_id, found in firsts.items() if found}


def retry_links(changes: Iterable[Any]) -> list[tuple[str, str]]:
    """(run retried, new run) of each ``retry`` change-log row (``before``, ``after``)."""
    pairs = ((_run_id(change.before), _run_id(change.after)) for change in changes)
    return [(old, new) for old, new in pairs if old is not None and new is not None]


def _succeeded(run: RunRecord) -> Resolution:
    return Resolution("succeeded", run.requested_by or run.host_id, run.finished_at, run.id)


def _after(success: datetime | None, failure: datetime | None) -> bool:
    return success is None or failure is None or success >= failure


def _run_id(document: str | None) -> str | None:
    if not document:
        return None
    value = json.loads(document)
    found = value.get("run_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
