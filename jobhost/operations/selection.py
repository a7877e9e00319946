"""Which jobs of a report to show, and in what order: the report's flags and the dashboard's
filters are one thing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from jobhost.operations.status import STATUSES

if TYPE_CHECKING:
    from jobhost.operations.report import JobReport

__all__ = ["SORTS", "JobFilter", "Sort", "select_jobs"]

Sort = Literal["name", "next", "last", "state"]
SORTS: tuple[Sort, ...] = ("name", "next", "last", "state")

# Most urgent first when sorting by state.
_URGENCY = {
    status: index
    for index, status in enumerate(
        (
            "stuck",
            "failing",
            "overdue",
            "behind",
            "invalid",
            "orphaned",
            "running",
            "waiting",
            "paused",
            "disabled",
            "ok",
        )
    )
}
assert set(_URGENCY) == set(STATUSES)
_FAILING = frozenset({"failed", "timed_out"})
_NEVER = datetime.min.replace(tzinfo=UTC)
_FOREVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class JobFilter:
    """``search`` matches name, module or description (any case); the others must all hold."""

    search: str = ""
    modules: Sequence[str] = ()
    statuses: Sequence[str] = ()
    failing: bool = False
    """Only jobs whose last attempt failed or timed out."""
    sort: Sort = "name"

    def keeps(self, job: JobReport) -> bool:
        needle = self.search.strip().lower()
        if needle and not any(
            needle in text.lower() for text in (job.name, job.module, job.description)
        ):
            return False
        if self.modules and job.module not in self.modules:
            return False
        if self.statuses and job.status not in self.statuses:
            return False
        return not self.failing or (job.last_run is not None and job.last_run.outcome in _FAILING)


def select_jobs(jobs: Sequence[JobReport], which: JobFilter) -> list[JobReport]:
    """The jobs ``which`` keeps, in its order (ties by name)."""
    kept = sorted((job for job in jobs if which.keeps(job)), key=lambda job: job.name)
    if which.sort == "next":
        kept.sort(key=lambda job: job.next_fire or _FOREVER)
    elif which.sort == "last":
        kept.sort(key=_last_started, reverse=True)
    elif which.sort == "state":
        # Within a status, critical jobs first: a failing critical job is the first to fix.
        kept.sort(key=lambda job: (_URGENCY[job.status], not job.critical))
    return kept


def _last_started(job: JobReport) -> datetime:
    last = job.last_run
    if last is None:
        return _NEVER
    return last.started_at or last.finished_at or _NEVER
