"""How runs end and what follows: outcomes to record, retries, failure streaks."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from jobhost_contracts import UnitCounts

from jobhost.records.rows import RunRecord


class Failing(NamedTuple):
    streak: int
    """Occurrences in a row that failed, at least 1."""
    critical: bool
    """The store's word (its copy of the declaration)."""


FAILED = ("failed", "timed_out", "abandoned")
"""The outcomes of a finished run that failed."""


STREAK_LIMIT = 100
"""A job's failure streak is counted up to this many attempts."""


@dataclass(frozen=True, slots=True, order=True)
class FailureKey:
    """A place in the list: a finished run's (finished time, run id); pages go to older keys."""

    finished_at: datetime
    run_id: str


@dataclass(frozen=True, slots=True)
class Finish:
    """How a run ended, as the envelope decided it."""

    outcome: str
    finished_at: datetime
    error_type: str | None = None
    error_message: str | None = None
    trace_id: str | None = None
    result: str | None = None
    """The executor's ``Success`` value as bounded JSON text (jobhost/envelope/envelope.py)."""


@dataclass(frozen=True, slots=True)
class RetryRequest:
    """The next attempt of a run that failed: any replica takes it once ``not_before`` passes."""

    run_id: str
    job_name: str
    occurrence: datetime | None
    attempt: int
    source: str
    idempotency_key: str | None
    requested_by: str | None
    reason: str | None
    not_before: datetime
    backfill_id: str | None = None
    attempt_base: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """One finished run to record: what ended, and the retry its policy asks for, if any."""

    run_id: str
    job_name: str
    started_at: datetime | None
    end: Finish
    retry: RetryRequest | None = None
    units: UnitCounts | None = None
    awaited: bool = False
    """Someone waits for this run's outcome (a manual request's): signal once it is recorded."""
    backfill_id: str | None = None
    """The backfill the run replays ``occurrence`` for: its item settles with this write."""
    occurrence: datetime | None = None


RetriesFor = Callable[[list[RunRecord], datetime], Sequence[RetryRequest]]
"""Given runs just recorded ``abandoned`` and the instant, the retries to queue for them."""


@dataclass(frozen=True)
class FailureFilter:
    since: datetime | None = None
    jobs: Collection[str] | None = None
    """Only these jobs' failures (None: every job's)."""
    text: str | None = None


@dataclass(frozen=True, slots=True)
class StreakRange:
    first: datetime
    """The streak's oldest failed occurrence: where the replay starts."""
    last: datetime
    """Its newest."""
    failed: int
    """Occurrences from ``first`` to ``last`` whose last attempt failed."""

    @property
    def end(self) -> datetime:
        """The range's end, which a backfill excludes: the newest failure plus the smallest
        step a stored time takes, so no later occurrence is in it."""
        return self.last + timedelta(microseconds=1)
