"""Fan-out over explicit units of work, resumable across retries and replicas.

``context.fan_out(tenants, purge_tenant, key=lambda t: t.id)`` runs ``work(unit)`` for every unit
and marks each unit that succeeded done in the job's durable, fenced state, keyed by the
occurrence. A retry of the occurrence, or the run that takes it over after a crash, skips the
units already done and runs the rest; a failed unit is not marked, so the next attempt runs it
again, alone. A run that lost its lease stops at its next mark (``StaleLeaseError``), and a
cancelled one between units (``JobCancelled``).

Only the standard library and ``returns``: the host reads the counts from :class:`UnitTally`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from returns.result import Failure, Result, Success

from jobhost_contracts.cancellation import Cancellation, JobCancelled
from jobhost_contracts.state import JobState, StaleLeaseError
from jobhost_contracts.units import FanOutFailed, UnitCounts, UnitFailure, UnitTally, error_text

__all__ = ["run_fan_out"]

Unit = TypeVar("Unit")

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
    run = _FanOut(state, scope, logger, report_failures, total=len(keyed))
    try:
        pending = []
        for unit_key, unit in keyed:
            if state.seen(run.mark(unit_key)):
                run.skipped += 1
            else:
                pending.append((unit_key, unit))
        stop = _Stop(cancellation, run, stop_after_failures)
        if concurrency == 1:
            for unit_key, unit in pending:
                if stop.now():
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


class _FanOut:
    """The running tally of one fan-out; ``finish`` is called once per unit that ran."""

    def __init__(
        self, state: JobState, scope: str, logger: logging.Logger, keep: int, *, total: int
    ) -> None:
        self._state = state
        self._scope = scope
        self.logger = logger
        self._keep = keep
        self._lock = threading.Lock()
        self.total = total
        self.succeeded = 0
        self.failed = 0
        self.skipped = 0
        self.failures: list[UnitFailure] = []

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


class _Stop:
    """Whether to start no further unit: cancelled, or enough failures."""

    def __init__(self, cancellation: Cancellation, run: _FanOut, after: int | None) -> None:
        self._cancellation = cancellation
        self._run = run
        self._after = after

    def now(self) -> bool:
        if self._cancellation.cancelled:
            return True
        return self._after is not None and self._run.failed >= self._after


def _concurrently(
    pending: list[tuple[str, Unit]],
    work: Callable[[Unit], Result[Any, Any]],
    run: _FanOut,
    stop: _Stop,
    concurrency: int,
) -> None:
    queue = iter(pending)
    in_flight: dict[Future[Result[Any, Any]], str] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="fan-out") as pool:
        while True:
            while error is None and len(in_flight) < concurrency and not stop.now():
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
