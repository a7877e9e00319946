"""What a fan-out reports: counts of units, the failed ones, and the run's tally of both."""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["FanOutFailed", "UnitCounts", "UnitFailure", "UnitTally", "error_text"]


@dataclass(frozen=True, slots=True)
class UnitCounts:
    """What happened to the units of one fan-out (or of every fan-out in a run, added up).

    ``total`` counts every unit given; those neither succeeded, failed nor already done were
    not started (the fan-out stopped after ``stop_after_failures`` failures).
    """

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped_already_done: int = 0

    @property
    def not_started(self) -> int:
        return self.total - self.succeeded - self.failed - self.skipped_already_done

    def __add__(self, other: UnitCounts) -> UnitCounts:
        return UnitCounts(
            total=self.total + other.total,
            succeeded=self.succeeded + other.succeeded,
            failed=self.failed + other.failed,
            skipped_already_done=self.skipped_already_done + other.skipped_already_done,
        )

    def describe(self) -> str:
        """``200 units: 97 succeeded, 1 failed, 102 already done``."""
        text = (
            f"{self.total} units: {self.succeeded} succeeded, {self.failed} failed, "
            f"{self.skipped_already_done} already done"
        )
        return text + (f", {self.not_started} not started" if self.not_started else "")


@dataclass(frozen=True, slots=True)
class UnitFailure:
    """One unit that failed: its key, and the ``Failure`` value or exception it ended with."""

    key: str
    error: object


class FanOutFailed(Exception):
    """The ``Failure`` of a fan-out in which at least one unit failed.

    ``failures`` holds the first ``len(failures)`` of ``counts.failed`` failed units. The message
    names them, so the run's recorded error says which units to look at.
    """

    def __init__(self, counts: UnitCounts, failures: tuple[UnitFailure, ...]) -> None:
        self.counts = counts
        self.failures = failures
        named = "; ".join(f"{f.key}: {error_text(f.error)}" for f in failures)
        more = counts.failed - len(failures)
        listed = f"{named}; and {more} more" if more > 0 else named
        stopped = f"; {counts.not_started} not started" if counts.not_started else ""
        super().__init__(f"{counts.failed} of {counts.total} units failed{stopped}: {listed}")

    @property
    def failed_keys(self) -> list[str]:
        return [failure.key for failure in self.failures]


class UnitTally:
    """The counts of every fan-out in one run, added up; the host reads them when it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: UnitCounts | None = None

    def add(self, counts: UnitCounts) -> None:
        with self._lock:
            self._counts = counts if self._counts is None else self._counts + counts

    def counts(self) -> UnitCounts | None:
        """None when the run did no fan-out."""
        with self._lock:
            return self._counts


def error_text(error: object) -> str:
    """A unit's error for people: ``ValueError: bad tenant`` or the Failure value's text."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)
