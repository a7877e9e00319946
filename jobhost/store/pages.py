"""What one dashboard page or API answer reads of the store, each in one read-only transaction,
so what the page shows side by side was true at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from jobhost.records import BackfillRecord, Dropped, JobChange, LogLine, RunRecord
from jobhost.store.backfills import list_backfills
from jobhost.store.lineage import manual_attempts, retried_run
from jobhost.store.operations import get_schedule
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.reports import (
    attempts_of,
    get_run,
    ledger_page,
    recent_failures,
    runs_between,
)
from jobhost.store.runlogs import read_lines
from jobhost.store.runtime import deletions, recent_changes

__all__ = ["JobPage", "RunPage", "api_deletion", "job_page", "run_page"]


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
    """The newest changes, oldest first."""
    backfills: list[BackfillRecord]
    """The job's newest backfills."""


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
) -> JobPage:
    """The job page's rows: the window's runs and outcome counts (in ``slices``), recent
    failures, ``history`` rows of its history from ``offset`` (of ``outcome`` when given),
    its newest changes and backfills. With ``now`` (the store's clock) the counts' closed
    minutes are read from their kept counts."""
    return JobPage(
        runs_between(connection, name, since, until),
        recent_failures(connection, name),
        ledger_page(connection, name, limit=history, outcome=outcome, offset=offset),
        outcome_counts(connection, since, until, slices, job=name, now=now),
        recent_changes(connection, job_name=name, limit=10)[::-1],
        list_backfills(connection, job=name, limit=5),
    )


def run_page(connection: Connection, run_id: str, *, after: int = 0, lines: int) -> RunPage | None:
    """The run, its attempts, and up to ``lines`` of its log lines numbered above ``after``;
    None for an unknown run."""
    run = get_run(connection, run_id)
    if run is None:
        return None
    found = read_lines(connection, run_id, after=after, limit=lines)
    attempts = (
        attempts_of(connection, run)
        if run.occurrence is not None
        else manual_attempts(connection, run)
    )
    return RunPage(run, attempts, found, retried_run(connection, run))


def api_deletion(connection: Connection, name: str) -> tuple[bool, JobChange | None]:
    """Whether ``name`` is a runtime job removed through the API, and the change that removed
    it (when the change log still has it)."""
    row = get_schedule(connection, name)
    if row is None or not row.orphaned or row.trigger_source != "api":
        return False, None
    return True, deletions(connection, [name]).get(name)
