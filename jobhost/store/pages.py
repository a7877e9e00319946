"""What one dashboard page or API answer reads of the store, each in one read-only transaction,
so what the page shows side by side was true at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from jobhost.store.operations import get_schedule
from jobhost.store.records import RunRecord
from jobhost.store.reports import (
    attempts_of,
    get_run,
    newest_runs,
    recent_failures,
    runs_between,
)
from jobhost.store.runlogs import Dropped, LogLine, read_lines
from jobhost.store.runtime import JobChange, deletions, recent_changes

__all__ = ["JobPage", "RunPage", "api_deletion", "job_page", "run_page"]


@dataclass(frozen=True)
class JobPage:
    window: list[RunRecord]
    """Runs between ``since`` and ``until``."""
    failures: list[RunRecord]
    latest: list[RunRecord]
    changes: list[JobChange]
    """The newest changes, newest first."""


@dataclass(frozen=True)
class RunPage:
    run: RunRecord
    attempts: list[RunRecord]
    lines: list[LogLine | Dropped]


def job_page(
    connection: Connection, name: str, since: datetime, until: datetime, *, latest: int = 20
) -> JobPage:
    return JobPage(
        runs_between(connection, name, since, until),
        recent_failures(connection, name),
        newest_runs(connection, name, latest),
        recent_changes(connection, job_name=name, limit=10)[::-1],
    )


def run_page(connection: Connection, run_id: str, *, after: int = 0, lines: int) -> RunPage | None:
    """The run, its attempts, and up to ``lines`` of its log lines numbered above ``after``;
    None for an unknown run."""
    run = get_run(connection, run_id)
    if run is None:
        return None
    found = read_lines(connection, run_id, after=after, limit=lines)
    return RunPage(run, attempts_of(connection, run), found)


def api_deletion(connection: Connection, name: str) -> tuple[bool, JobChange | None]:
    """Whether ``name`` is a runtime job removed through the API, and the change that removed
    it (when the change log still has it)."""
    row = get_schedule(connection, name)
    if row is None or not row.orphaned or row.trigger_source != "api":
        return False, None
    return True, deletions(connection, [name]).get(name)
