"""Failed runs across jobs, newest first, read by index a page at a time.

Each failed outcome (``failed``, ``timed_out``, ``abandoned``) is its own stream read from
``ix_runs_outcome_finished_at`` (outcome, finished time, id) — or, for one job, from
``ix_runs_job_name_outcome_finished_at`` — with a LIMIT; the streams are merged here. A page
continues after a key (finished time, run id), never by an offset, so the thousandth page costs
what the first does. Stuck runs (running, with an expired lease or code that ignored its
cancellation) are few and come from ``ix_runs_outcome_lease_expires_at``.

A search by error text looks at no more than :data:`SEARCH_SCAN` rows of each stream per page:
when it stops there, the page says how far back it looked, and the next page goes on from there.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, literal, or_, select
from sqlalchemy.engine import Connection

from jobhost.records import FAILED, PENDING, RUNNING, STREAK_LIMIT, FailureKey, RunRecord
from jobhost.store.reports import NEWEST_FIRST
from jobhost.store.schema import runs

__all__ = [
    "SEARCH_SCAN",
    "FailurePage",
    "failure_page",
    "failure_streaks",
    "stuck_runs",
]


SEARCH_SCAN = 20_000
"""Rows of each failed outcome a search by text examines for one page."""


_NOT_ATTEMPTS = ("missed", "skipped", PENDING, RUNNING)


@dataclass(frozen=True)
class FailurePage:
    runs: list[RunRecord]
    """Finished failed runs, newest first."""
    next_key: FailureKey | None
    """Where the next page starts (older than this key); None when nothing older is left."""
    searched_to: FailureKey | None
    """A text search stopped looking at this key (the page may hold fewer matches than asked);
    None when it looked at everything up to the page's end."""


def failure_page(
    connection: Connection,
    *,
    limit: int,
    since: datetime | None = None,
    job: str | None = None,
    text: str | None = None,
    after: FailureKey | None = None,
    jobs: Collection[str] | None = None,
) -> FailurePage:
    """Up to ``limit`` finished failed runs older than ``after``, newest first; of ``job`` (or
    of ``jobs``), finished at or after ``since``, with ``text`` in their error type or message
    (case-insensitive), when given."""
    streams: list[list[tuple[FailureKey, RunRecord]]] = []
    frontier: FailureKey | None = None
    if job is not None:
        jobs = [job]
    for outcome in FAILED:
        query = _stream(outcome, since=since, jobs=jobs, after=after)
        if text:
            scanned = query.limit(SEARCH_SCAN).subquery()
            matched = (
                select(scanned)
                .where(_error_text(scanned.c).like(_pattern(text), escape="\\"))
                .order_by(scanned.c.finished_at.desc(), scanned.c.id.desc())
                .limit(limit + 1)
            )
            rows = connection.execute(matched).mappings()
            last = connection.execute(
                select(runs.c.finished_at, runs.c.id)
                .where(*_conditions(outcome, since=since, jobs=jobs, after=after))
                .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
                .offset(SEARCH_SCAN - 1)
                .limit(1)
            ).first()
            if last is not None:
                bound = FailureKey(last[0], str(last[1]))
                frontier = bound if frontier is None else max(frontier, bound)
        else:
            rows = connection.execute(query.limit(limit + 1)).mappings()
        streams.append([(_key(run), run) for run in (RunRecord.from_row(r) for r in rows)])
    merged = heapq.merge(*streams, key=lambda pair: pair[0], reverse=True)
    found = [pair for pair in merged if frontier is None or pair[0] >= frontier]
    page = [run for _, run in found[:limit]]
    if len(found) > limit:
        return FailurePage(page, _key(page[-1]), None)
    if frontier is not None:
        return FailurePage(page, frontier, frontier)
    return FailurePage(page, None, None)


def stuck_runs(
    connection: Connection,
    now: datetime,
    *,
    limit: int,
    job: str | None = None,
    text: str | None = None,
    jobs: Collection[str] | None = None,
) -> list[RunRecord]:
    """Running runs whose lease expired before ``now`` or whose code ignored its cancellation,
    newest start first, at most ``limit``; of ``job`` (or ``jobs``) when given."""
    query = select(runs).where(
        runs.c.outcome == RUNNING,
        or_(runs.c.lease_expires_at < now, runs.c.error_type == "Stuck"),
    )
    if job is not None:
        jobs = [job]
    if jobs is not None:
        query = query.where(runs.c.job_name.in_(sorted(jobs)))
    if text:
        query = query.where(_error_text(runs.c).like(_pattern(text), escape="\\"))
    query = query.order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(limit)
    return [RunRecord.from_row(row) for row in connection.execute(query).mappings()]


def failure_streaks(connection: Connection, names: Collection[str]) -> dict[str, int]:
    """Each job's failed attempts in a row, counting back from its newest finished attempt
    (up to :data:`STREAK_LIMIT`); 0 when its newest attempt did not fail."""
    streaks: dict[str, int] = {}
    for name in sorted(set(names)):
        query = (
            select(runs.c.outcome)
            .where(runs.c.job_name == name, runs.c.outcome.not_in(_NOT_ATTEMPTS))
            .order_by(*NEWEST_FIRST)
            .limit(STREAK_LIMIT)
        )
        count = 0
        for outcome in connection.execute(query).scalars():
            if outcome not in FAILED:
                break
            count += 1
        streaks[name] = count
    return streaks


def _stream(
    outcome: str,
    *,
    since: datetime | None,
    jobs: Collection[str] | None,
    after: FailureKey | None,
) -> Select[Any]:
    return (
        select(runs)
        .where(*_conditions(outcome, since=since, jobs=jobs, after=after))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
    )


def _conditions(
    outcome: str,
    *,
    since: datetime | None,
    jobs: Collection[str] | None,
    after: FailureKey | None,
) -> Sequence[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = [
        runs.c.outcome == outcome,
        runs.c.finished_at.is_not(None),
    ]
    if jobs is not None and len(jobs) == 1:
        found.append(runs.c.job_name == next(iter(jobs)))
    elif jobs is not None:
        found.append(runs.c.job_name.in_(sorted(jobs)))
    if since is not None:
        found.append(runs.c.finished_at >= since)
    if after is not None:
        # The first condition bounds the index range; the second breaks ties by id.
        found.append(runs.c.finished_at <= after.finished_at)
        found.append(
            or_(
                runs.c.finished_at < after.finished_at,
                and_(runs.c.finished_at == after.finished_at, runs.c.id < after.run_id),
            )
        )
    return found


def _error_text(columns: Any) -> ColumnElement[str]:
    return func.lower(
        func.coalesce(columns.error_type, literal(""))
        + literal(" ")
        + func.coalesce(columns.error_message, literal(""))
    )


def _pattern(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _key(run: RunRecord) -> FailureKey:
    assert run.finished_at is not None  # the streams read finished runs only
    return FailureKey(run.finished_at, run.id)
