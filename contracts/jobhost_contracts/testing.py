"""Testing an executor without a host or a store: :func:`run_job` and :class:`MemoryState`
(docs/operations/writing-a-module.md, "Testing").

``run_job`` builds the context the host would and reads what the executor did the way the host
does, on the caller's thread, so freezegun and monkeypatching apply. The pytest fixture
``run_job`` (installed with these contracts) shares one :class:`MemoryState` per test.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from returns.result import Failure, Result, Success

from jobhost_contracts.cancellation import Cancellation, JobCancelled
from jobhost_contracts.context import JobContext, TriggerSource, frozen
from jobhost_contracts.executor import IJobExecutor, JobFunction, as_executor
from jobhost_contracts.units import UnitCounts, UnitTally

__all__ = ["JobRun", "MemoryState", "run_job"]

_TIMEOUT = "timeout"


class MemoryState:
    """The state API (:class:`~jobhost_contracts.JobState`) in memory, unfenced; the host's is
    durable and fenced by the run's lease. ``values`` and ``done`` are open for assertions."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        self.done: set[str] = set()
        self._lock = threading.Lock()  # fan_out marks units from several threads

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        if not isinstance(value, str):
            # The host's store keeps text; a test must fail where a run would.
            raise TypeError(f"state values are strings, got {type(value).__name__}")
        self.values[key] = value

    def record(self, idempotency_key: str) -> bool:
        with self._lock:
            new = idempotency_key not in self.done
            self.done.add(idempotency_key)
            return new

    def seen(self, idempotency_key: str) -> bool:
        return idempotency_key in self.done


@dataclass(frozen=True)
class JobRun:
    """What one run did: its ``result`` (a ``Result``, ``Failure(exception)`` for a raise), its
    ``outcome`` as the ledger would say it, the ``log`` lines it wrote (``"INFO sent 2"``), its
    ``state`` afterwards, its fan-out ``units`` and the ``context`` it was given."""

    result: Result[Any, Any]
    outcome: str
    log: list[str]
    state: MemoryState
    context: JobContext
    units: UnitCounts | None = None
    exception: BaseException | None = field(default=None, repr=False)


def run_job(
    executor: IJobExecutor | JobFunction,
    *,
    occurrence: datetime | None = None,
    config: Mapping[str, Any] | None = None,
    state: MemoryState | None = None,
    attempt: int = 1,
    source: TriggerSource | None = None,
    timeout: float | timedelta | None = None,
    job_name: str = "module.job",
    cancellation: Cancellation | None = None,
) -> JobRun:
    """Run ``executor`` (an object with ``execute(context)`` or a function) once, as the host.

    ``occurrence`` None is a manual run (its idempotency key is the run's own);
    ``source`` defaults to ``SCHEDULE`` with an occurrence (``RETRY`` from attempt 2), else
    ``MANUAL``. ``timeout`` (seconds or a ``timedelta``) cancels the run with reason
    ``"timeout"``; pass a ``cancellation`` cancelled beforehand to test a shutdown.
    """
    if occurrence is not None and occurrence.tzinfo is None:
        raise ValueError("occurrence must be an aware datetime (the host's are in UTC)")
    state = MemoryState() if state is None else state
    run_id = uuid.uuid4().hex
    lines: list[str] = []
    context = JobContext(
        job_name=job_name,
        run_id=run_id,
        occurrence=None if occurrence is None else occurrence.astimezone(UTC),
        attempt=attempt,
        source=source or _source(occurrence, attempt),
        idempotency_key=_key(job_name, occurrence, run_id),
        fencing_token=1,
        # Read-only, as the host hands it over: a job writing into its section fails in tests.
        config=frozen(config or {}),
        logger=_logger(job_name, lines),
        cancellation=cancellation or Cancellation(),
        state=state,
        unit_tally=UnitTally(),
    )
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    timer = threading.Timer(seconds or 0, context.cancellation.cancel, args=(_TIMEOUT,))
    timer.daemon = True
    if seconds is not None:
        timer.start()
    try:
        result, error = _call(as_executor(executor), context)
    finally:
        timer.cancel()
    return JobRun(
        result=result,
        outcome=_outcome(result, error, context.cancellation),
        log=lines,
        state=state,
        context=context,
        units=context.unit_tally.counts(),
        exception=error,
    )


def _call(
    executor: IJobExecutor, context: JobContext
) -> tuple[Result[Any, Any], BaseException | None]:
    try:
        value: Any = executor.execute(context)
        if inspect.isawaitable(value):
            value = asyncio.run(context.cancellation.drive(value))
    except (JobCancelled, asyncio.CancelledError) as error:
        return Failure(error), error
    except Exception as error:  # a bug in the executor: the host records a failed run too
        context.logger.error("raised %s: %s", type(error).__name__, error)
        return Failure(error), error
    if isinstance(value, Success | Failure):
        return value, None
    wrong = TypeError(f"executor returned {type(value).__name__}, not a returns Result")
    return Failure(wrong), wrong


def _outcome(
    result: Result[Any, Any], error: BaseException | None, cancellation: Cancellation
) -> str:
    if cancellation.cancelled or isinstance(error, JobCancelled | asyncio.CancelledError):
        # Whatever an executor returns after being cancelled describes a partial run.
        return "timed_out" if cancellation.reason == _TIMEOUT else "cancelled"
    return "succeeded" if isinstance(result, Success) else "failed"


def _source(occurrence: datetime | None, attempt: int) -> TriggerSource:
    if occurrence is None:
        return TriggerSource.MANUAL
    return TriggerSource.RETRY if attempt > 1 else TriggerSource.SCHEDULE


def _key(job_name: str, occurrence: datetime | None, run_id: str) -> str:
    # The host's keys: every attempt at one occurrence shares it; a manual run has its own.
    if occurrence is None:
        return f"{job_name}:manual:{run_id}"
    return f"{job_name}:{occurrence.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self._lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self._lines.append(f"{record.levelname} {record.getMessage()}")


def _logger(job_name: str, lines: list[str]) -> logging.Logger:
    # A logger of this run alone, as the host's: its lines are the run's log, and they still
    # reach the registered jobhost.job.NAME logger (and pytest's caplog) through its parent.
    name = f"jobhost.job.{job_name}"
    logger = logging.Logger(name, logging.DEBUG)
    logger.parent = logging.getLogger(name)
    logger.addHandler(_Lines(lines))
    return logger
