"""A page of open failures: the failures list, with the resolved ones left out.

Failures are read a page at a time from the failure streams (``jobhost.store.failures``) and
those a later success or an acknowledgement resolved (``jobhost.store.resolution``) are
dropped. Where most failures of a stretch are resolved, one page looks at no more than
:data:`OPEN_SCAN` failures: it then ends early and says how far back it looked, and the next
page goes on from there, so a page costs what it reads, never the ledger's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from jobhost.records import FailureFilter, FailureKey, Resolution, RunRecord
from jobhost.store.failures import FailurePage, failure_page, failure_streaks, stuck_runs
from jobhost.store.resolution import resolutions

__all__ = [
    "OPEN_SCAN",
    "FailureRows",
    "ResolvedPage",
    "failure_rows",
    "open_runs",
    "resolved_page",
]

OPEN_SCAN = 2_000
"""The most failures one page of open failures looks at."""

_CHUNK = 200


@dataclass(frozen=True)
class ResolvedPage:
    page: FailurePage
    resolved: dict[str, Resolution]
    """Of the page's runs, those resolved, by run id."""


def resolved_page(
    connection: Connection,
    *,
    limit: int,
    where: FailureFilter,
    after: FailureKey | None,
    open_only: bool,
) -> ResolvedPage:
    """Up to ``limit`` failures older than ``after``, newest first, with how the resolved ones
    were resolved; only open ones when ``open_only``."""
    if not open_only:
        page = _read(connection, limit, where, after)
        return ResolvedPage(page, resolutions(connection, page.runs))
    kept: list[RunRecord] = []
    key, looked = after, 0
    while True:
        page = _read(connection, min(_CHUNK, OPEN_SCAN - looked), where, key)
        resolved = resolutions(connection, page.runs)
        for run in page.runs:
            if run.id not in resolved:
                kept.append(run)
                if len(kept) == limit:
                    return ResolvedPage(FailurePage(kept, _key(run), None), {})
        looked += len(page.runs)
        if page.next_key is None or page.searched_to is not None:
            return ResolvedPage(FailurePage(kept, page.next_key, page.searched_to), {})
        key = page.next_key
        if looked >= OPEN_SCAN:
            return ResolvedPage(FailurePage(kept, key, key), {})


@dataclass(frozen=True)
class FailureRows:
    """What one failures page reads together: stuck runs, the page of finished failures (None
    when the stuck runs fill it), how its resolved runs were resolved, and each of their jobs'
    failure streak."""

    stuck: list[RunRecord]
    page: FailurePage | None
    resolved: dict[str, Resolution]
    streaks: dict[str, int]


def failure_rows(
    connection: Connection,
    now: datetime,
    *,
    limit: int,
    where: FailureFilter,
    after: FailureKey | None,
    open_only: bool = True,
) -> FailureRows:
    """Stuck runs first (on the first page, ``after`` None), then finished failures (open ones
    only, unless ``open_only`` is False), up to ``limit`` in all, with their jobs' streaks."""
    stuck = []
    if after is None:
        stuck = stuck_runs(connection, now, limit=limit, jobs=where.jobs, text=where.text)
    found = (
        resolved_page(
            connection, limit=limit - len(stuck), where=where, after=after, open_only=open_only
        )
        if len(stuck) < limit
        else None
    )
    finished = found.page.runs if found is not None else []
    streaks = failure_streaks(connection, {run.job_name for run in [*stuck, *finished]})
    return FailureRows(
        stuck,
        found.page if found is not None else None,
        found.resolved if found is not None else {},
        streaks,
    )


def open_runs(connection: Connection, *, limit: int, where: FailureFilter) -> list[RunRecord]:
    """The newest open finished failures ``where`` matches, at most ``limit``."""
    return resolved_page(connection, limit=limit, where=where, after=None, open_only=True).page.runs


def _read(
    connection: Connection, limit: int, where: FailureFilter, after: FailureKey | None
) -> FailurePage:
    return failure_page(
        connection, limit=limit, since=where.since, jobs=where.jobs, text=where.text, after=after
    )


def _key(run: RunRecord) -> FailureKey:
    assert run.finished_at is not None  # the failure streams read finished runs only
    return FailureKey(run.finished_at, run.id)
