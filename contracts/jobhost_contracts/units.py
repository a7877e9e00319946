"""Fan-out over explicit units of work (:meth:`JobContext.fan_out` says how it behaves), and what
it reports: the host reads the counts from :class:`UnitTally`."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import astuple, dataclass, field
from typing import Any, TypeVar

from returns.result import Failure, Result, Success

from jobhost_contracts.cancellation import Cancellation, JobCancelled
from jobhost_contracts.state import JobState, StaleLeaseError

__all__ = ["FanOutFailed", "UnitCounts", "UnitFailure", "UnitTally", "error_text", "run_fan_out"]

Unit = TypeVar("Unit")


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
        pairs = zip(astuple(self), astuple(other), strict=True)
        return UnitCounts(*(mine + theirs for mine, theirs in pairs))

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


class UnitTally(list[UnitCounts]):
    """The counts of every fan-out in one run; the host adds them up when the run ends.

    A list, so a run that fans out nothing costs no call here: ``append`` is atomic, and
    the host asks :meth:`counts` only of a tally that holds something.
    """

    add = list.append

    def counts(self) -> UnitCounts | None:
        """None when the run did no fan-out."""
        total: UnitCounts | None = None
        for counts in self:
            total = counts if total is None else total + counts
        return total


def error_text(error: object) -> str:
    """A unit's error for people: ``ValueError: bad tenant`` or the Failure value's text."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)


_MARK_LIMIT = 300
"""The longest key the host's state accepts; a longer mark is shortened by a digest."""


def run_fan_out(
    units: Iterable[Unit],
    work: Callable[[Unit], Result[Any, Any]],
    *,
    state: JobState,
    cancellation: Cancellation,
    scope: str,
    tally: UnitTally,
    logger: logging.Logger,
    key: Callable[[Unit], str] = str,
    concurrency: int = 1,
    stop_after_failures: int | None = None,
    report_failures: int = 10,
) -> Result[UnitCounts, FanOutFailed]:
    """What :meth:`JobContext.fan_out` does, with the context's parts passed in."""
    if concurrency < 1:
        raise ValueError(f"fan_out: concurrency must be at least 1, got {concurrency}")
    if stop_after_failures is not None and stop_after_failures < 1:
        raise ValueError(
            f"fan_out: stop_after_failures must be None or >= 1, got {stop_after_failures}"
        )
    keyed = _keyed(units, key)
    run = _FanOut(state, scope, logger, report_failures, len(keyed))

    def stop() -> bool:
        limit = stop_after_failures
        return cancellation.cancelled or (limit is not None and run.failed >= limit)

    try:
        pending = []
        for unit_key, unit in keyed:
            if state.seen(run.mark(unit_key)):
                run.skipped += 1
            else:
                pending.append((unit_key, unit))
        if concurrency == 1:
            for unit_key, unit in pending:
                if stop():
                    break
                run.finish(unit_key, _attempt(work, unit_key, unit, logger))
        else:
            _concurrently(pending, work, run, stop, concurrency)
    finally:
        tally.add(run.counts())
    cancellation.raise_if_cancelled()
    counts = run.counts()
    if counts.failed:
        return Failure(FanOutFailed(counts, tuple(run.failures)))
    return Success(counts)


@dataclass
class _FanOut:
    """The running tally of one fan-out; ``finish`` is called once per unit that ran."""

    _state: JobState
    _scope: str
    logger: logging.Logger
    _keep: int
    total: int
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[UnitFailure] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, unit_key: str) -> str:
        mark = f"{self._scope}#unit:{unit_key}"
        if len(mark) <= _MARK_LIMIT:
            return mark
        # Too long to store whole: a readable prefix and a digest of the whole, unique.
        digest = hashlib.sha256(mark.encode()).hexdigest()
        return f"{mark[: _MARK_LIMIT - len(digest) - 1]}~{digest}"

    def finish(self, unit_key: str, outcome: Result[Any, Any]) -> None:
        match outcome:
            case Success(_):
                # Raises StaleLeaseError once this run lost its lease: the fan-out stops here.
                self._state.record(self.mark(unit_key))
                with self._lock:
                    self.succeeded += 1
            case Failure(error):
                self.logger.warning("unit %s failed: %s", unit_key, error_text(error))
                with self._lock:
                    self.failed += 1
                    if len(self.failures) < self._keep:
                        self.failures.append(UnitFailure(unit_key, error))

    def counts(self) -> UnitCounts:
        with self._lock:
            return UnitCounts(self.total, self.succeeded, self.failed, self.skipped)


def _concurrently(
    pending: list[tuple[str, Unit]],
    work: Callable[[Unit], Result[Any, Any]],
    run: _FanOut,
    stop: Callable[[], bool],
    concurrency: int,
) -> None:
    queue = iter(pending)
    in_flight: dict[Future[Result[Any, Any]], str] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="fan-out") as pool:
        while True:
            while error is None and len(in_flight) < concurrency and not stop():
                item = next(queue, None)
                if item is None:
                    break
                in_flight[pool.submit(_attempt, work, item[0], item[1], run.logger)] = item[0]
            if not in_flight:
                break
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                unit_key = in_flight.pop(future)
                try:
                    run.finish(unit_key, future.result())
                except Exception as raised:  # StaleLeaseError, JobCancelled: stop, then raise
                    error = error or raised
    if error is not None:
        raise error


def _attempt(
    work: Callable[[Unit], Result[Any, Any]], unit_key: str, unit: Unit, logger: logging.Logger
) -> Result[Any, Any]:
    """``work(unit)``; an exception fails this unit only, unless it means the run must stop."""
    try:
        outcome = work(unit)
    except (StaleLeaseError, JobCancelled):
        raise
    except Exception as error:  # one unit's bug must not stop the others; it is logged
        logger.exception("unit %s raised %s", unit_key, type(error).__name__)
        return Failure(error)
    if not isinstance(outcome, Success | Failure):
        return Failure(TypeError(f"work returned {type(outcome).__name__}, not a returns Result"))
    return outcome


def _keyed(units: Iterable[Unit], key: Callable[[Unit], str]) -> list[tuple[str, Unit]]:
    keyed: list[tuple[str, Unit]] = []
    seen: set[str] = set()
    for unit in units:
        unit_key = key(unit)
        if not isinstance(unit_key, str) or not unit_key:
            raise ValueError(
                f"fan_out: key({unit!r}) gave {unit_key!r}; it must be a non-empty str"
            )
        if unit_key in seen:
            raise ValueError(
                f"fan_out: two units share the key {unit_key!r}; each unit needs its own key, "
                "or one would be skipped as done"
            )
        seen.add(unit_key)
        keyed.append((unit_key, unit))
    return keyed
