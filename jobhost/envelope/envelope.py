"""The one path every run takes, whatever started it: execute, record, retry, report.

The outcome goes to the ledger first, with the run's last log lines (the host's recorder retries
while the store is away: an outcome is never dropped), then to metrics and the audit sinks,
which can only warn.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import math
import queue
import reprlib
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from jobhost_contracts import (
    AuditSink,
    Cancellation,
    IJobExecutor,
    JobCancelled,
    JobContext,
    RunAuditRecord,
    TriggerSource,
    UnitCounts,
)
from jobhost_contracts.units import UnitTally
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from returns.result import Failure, Success

from jobhost.catalog import JobSpec
from jobhost.clock import Clock
from jobhost.envelope.lifecycle import (
    Finished,
    Outcome,
    Recorded,
    Reporter,
    ledger_outcome,
)
from jobhost.envelope.reporting import UNIT_RESULTS, Telemetry
from jobhost.envelope.runlog import JobLogger, RunLogWriter, running, storable_text
from jobhost.records import Claim, occurrence_text
from jobhost.records import Outcome as LedgerOutcome
from jobhost.store import Store
from jobhost.store.ledger import Recording

__all__ = [
    "RESULT_LIMIT",
    "DaemonThreads",
    "RunEnvelope",
    "SupervisedCancellation",
    "execute_here",
    "result_json",
]

_log = logging.getLogger("jobhost.envelope")


class RunEnvelope:
    """Runs claims for one host; its clock (the executor's start and end) is ``store.clock``."""

    def __init__(
        self,
        store: Store,
        *,
        host_id: str,
        grace: timedelta,
        telemetry: Telemetry,
        run_logs: RunLogWriter,
        sinks: Sequence[AuditSink] = (),
        sink_timeout: timedelta = timedelta(seconds=5),
        store_time: Clock | None = None,
    ) -> None:
        self._store = store
        self._host_id = host_id
        self._grace = grace
        self._telemetry = telemetry
        self._reporter = Reporter(sinks, telemetry, sink_timeout.total_seconds())
        # ``flush_reports(timeout)``: False when some reports were still on their way.
        self.flush_reports = self._reporter.drain
        self._run_logs = run_logs
        # The store's time estimated from the host's turns; None: read where it is needed.
        self._store_time = store_time

    def execute(
        self,
        claim: Claim,
        spec: JobSpec,
        cancellation: Cancellation,
        *,
        on_stuck: Callable[[Outcome], None],
    ) -> Finished:
        """Run the executor inside the run's span, which ends with the outcome."""
        attributes: dict[str, str | int] = {
            "jobhost.job.name": claim.job_name,
            "jobhost.job.module": spec.declaration.module,
            "jobhost.run.id": claim.run_id,
            "jobhost.run.attempt": claim.attempt,
            "jobhost.run.source": claim.source,
        }
        if claim.occurrence is not None:
            attributes["jobhost.run.occurrence"] = occurrence_text(claim.occurrence)
        if claim.backfill_id is not None:
            attributes["jobhost.run.backfill_id"] = claim.backfill_id
        with self._telemetry.tracer.start_as_current_span(
            claim.job_name,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            span_context = span.get_span_context()
            trace_id = format(span_context.trace_id, "032x") if span_context.is_valid else None
            tally = UnitTally()
            run_log = self._run_logs.open(claim.run_id, claim.job_name, claim.attempt)
            began = self._store.clock()
            context = JobContext(
                job_name=claim.job_name,
                run_id=claim.run_id,
                occurrence=claim.occurrence,
                attempt=claim.attempt,
                source=TriggerSource(claim.source),
                idempotency_key=claim.idempotency_key,
                fencing_token=claim.fencing_token,
                config=spec.config,
                logger=JobLogger(f"jobhost.job.{claim.job_name}", run_log),
                cancellation=cancellation,
                state=self._store.job_state(
                    claim.job_name,
                    claim.fencing_token,
                    self._store.clock,
                    run_id=claim.run_id,
                    host_id=self._host_id,
                    store_time=self._store_time,
                ),
                unit_tally=tally,
            )
            timeout = spec.declaration.timeout
            seconds = timeout.total_seconds() if timeout is not None else None
            grace = self._grace.total_seconds()
            with running(run_log):
                outcome = execute_here(
                    spec.executor, context, timeout=seconds, grace=grace, on_stuck=on_stuck
                )
            error = outcome.exception
            if (
                error is not None
                and error.__traceback__ is not None
                and run_log.add(time.time(), "ERROR", _stack(error))
            ):
                run_log.wake()
            ended = self._store.clock()
            units = tally.counts() if tally else None
            if span.is_recording():
                _close_span(span, outcome, units)
        return Finished(claim, spec, outcome, trace_id, units, began, ended, run_log)

    def record(self, batch: Sequence[Finished], *, isolate: bool = False) -> list[Recorded]:
        """Write ``batch``'s outcomes, their retries and last log lines in one transaction. With
        ``isolate`` a row the database refuses comes back with the verdict ``running``."""
        store = self._store

        def outcomes_at(now: datetime) -> list[LedgerOutcome]:
            host_now = store.clock()  # the host's clock as the store's reads ``now``
            return [ledger_outcome(finished, now, host_now) for finished in batch]

        ended = [f.run_log for f in batch if f.run_log is not None]
        with self._run_logs.finishing(ended) as logs:
            recording = Recording(
                self._host_id, outcomes_at, store.clock, self._store_time, isolate=isolate
            )
            done = store.record_finished(logs, recording)
        assert done is not None  # outcomes were given
        return [
            Recorded(
                finished,
                entry,
                finished.claim.run_id in done.recorded,
                done.verdicts.get(finished.claim.run_id),
                done.now,
            )
            for finished, entry in zip(batch, done.entries, strict=True)
        ]

    def settle(self, done: Recorded) -> None:
        """Say what the ledger answered, and queue the run's metrics and audit record."""
        finished, entry = done.finished, done.entry
        claim, outcome = finished.claim, finished.outcome.outcome
        if not done.recorded:
            _log.warning(
                "job %s run %s finished %s, but the ledger already says %s: "
                "its lease had been taken over",
                claim.job_name,
                claim.run_id,
                outcome,
                done.verdict,
            )
        elif entry.retry is not None:
            _log.info(
                "job %s: attempt %d %s; retry in %.1fs",
                claim.job_name,
                claim.attempt,
                outcome,
                (entry.retry.not_before - done.written_at).total_seconds(),
            )
        try:
            # ``verdict``: the ledger's outcome when another replica's differs from this host's,
            # so the audit never contradicts the ledger.
            started_at = entry.started_at or claim.started_at
            finished_at = entry.end.finished_at
            duration = max((finished_at - started_at).total_seconds(), 0.0)
            self._reporter.submit(
                RunAuditRecord(
                    job_name=claim.job_name,
                    module=finished.spec.declaration.module,
                    run_id=claim.run_id,
                    occurrence=claim.occurrence,
                    attempt=claim.attempt,
                    source=claim.source,
                    host_id=self._host_id,
                    outcome=done.verdict or outcome,
                    started_at=started_at,
                    finished_at=finished_at,
                    duration_ms=round(duration * 1000),
                    error_type=finished.outcome.error_type,
                    error_message=storable_text(finished.outcome.error_message),
                    trace_id=finished.trace_id,
                    units=finished.units,
                    backfill_id=claim.backfill_id,
                    result=finished.outcome.result,
                )
            )
        except Exception:  # reporting must never undo a recorded outcome
            _log.exception("job %s run %s: reporting failed", claim.job_name, claim.run_id)


def _close_span(span: Span, outcome: Outcome, units: UnitCounts | None) -> None:
    span.set_attribute("jobhost.run.outcome", outcome.outcome)
    if units is not None:
        span.set_attributes({f"units.{n}": getattr(units, n) for n in ("total", *UNIT_RESULTS)})
    if outcome.exception is not None:
        # Redacted and bounded like the log: a span is exported to a collector.
        span.record_exception(
            outcome.exception,
            attributes={
                "exception.message": storable_text(str(outcome.exception)) or "",
                "exception.stacktrace": storable_text(_stack(outcome.exception)) or "",
            },
        )
    if outcome.outcome == "succeeded":
        span.set_status(Status(StatusCode.OK))
    else:
        span.set_status(
            Status(StatusCode.ERROR, storable_text(outcome.error_message) or outcome.outcome)
        )


def _stack(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


# -- calling an executor -----------------------------------------------------------------------
# ``Success`` is ``succeeded``; ``Failure`` is ``failed`` (a business failure is a host failure, not
# a quiet success); an exception is ``failed``; a run cancelled by shutdown or a lost lease is
# ``cancelled``; a run past its deadline is ``timed_out``. A call that ignores its cancellation
# for the grace period is stuck: it keeps its worker, slot and lease until it ends.


def execute_here(
    executor: IJobExecutor,
    context: JobContext,
    *,
    timeout: float | None,
    grace: float,
    on_stuck: Callable[[Outcome], None],
) -> Outcome:
    """Run ``executor.execute(context)`` on this thread under the supervisor, which calls
    ``on_stuck(verdict)`` from its thread; a stuck call's outcome is that verdict."""
    cancellation = context.cancellation
    if not isinstance(cancellation, SupervisedCancellation):
        raise TypeError("execute_here needs the run's cancellation to be a SupervisedCancellation")
    box: list[Outcome] = []
    watched = _SUPERVISOR.watch(
        _Watch(
            cancellation,
            None if timeout is None else time.monotonic() + timeout,
            grace,
            lambda: on_stuck(_stuck_verdict(context, grace, warn=True)),
        )
    )
    try:
        # In a copy of the caller's context: the executor's spans nest under the run's span,
        # and whatever it sets stays out of the worker's context for the runs after it.
        contextvars.copy_context().run(_call, executor, context, box.append)
    finally:
        stuck = _SUPERVISOR.release(watched)  # true if declared stuck before it ended
    if stuck:
        return _stuck_verdict(context, grace)
    result = box[0] if box else Outcome("failed", error_type="Lost", error_message="no result")
    if cancellation.cancelled and result.outcome in {"succeeded", "failed"}:
        # Whatever an executor returns after being cancelled describes a partial run.
        return Outcome(
            _cancel_outcome(cancellation),
            value=result.value,
            result=result.result,
            error_type=result.error_type,
            error_message=result.error_message or f"cancelled: {cancellation.reason}",
            exception=result.exception,
        )
    return result


def _stuck_verdict(context: JobContext, grace: float, *, warn: bool = False) -> Outcome:
    cancellation = context.cancellation
    message = f"executor ignored cancellation ({cancellation.reason}) for {grace:g}s"
    if warn:
        _log.warning(
            "job %s run %s: %s; its slot and lease stay taken until it ends",
            context.job_name,
            context.run_id,
            message,
        )
    return Outcome(
        _cancel_outcome(cancellation), error_type="Stuck", error_message=message, stuck=True
    )


def _call(executor: IJobExecutor, context: JobContext, deliver: Callable[[Outcome], None]) -> None:
    try:
        value: Any = executor.execute(context)
        if inspect.isawaitable(value):
            value = asyncio.run(context.cancellation.drive(value))
        match value:
            case Success(inner):
                # Made here, on the executor's thread, once: the ledger and the audit share it.
                deliver(Outcome("succeeded", value=inner, result=result_json(inner)))
            case Failure(BaseException() as error):
                deliver(_raised(error))
            case Failure(error):
                deliver(Outcome("failed", error_type="Failure", error_message=str(error)))
            case _:
                message = f"executor returned {type(value).__name__}, not a returns Result"
                deliver(Outcome("failed", error_type="TypeError", error_message=message))
    except (JobCancelled, asyncio.CancelledError) as error:
        deliver(_raised(error, _cancel_outcome(context.cancellation), "cancelled"))
    except Exception as error:
        _log.error(
            "job %s run %s raised %s: %s",
            context.job_name,
            context.run_id,
            type(error).__name__,
            error,
            exc_info=error,
        )
        deliver(_raised(error))
    except BaseException as error:  # in a job's thread: recorded, never re-raised
        # SystemExit or KeyboardInterrupt would end only this thread, and the run would be
        # recorded "Lost: no result"; the executor asked to end the process, not its call.
        if isinstance(error, SystemExit | KeyboardInterrupt):
            what = "tried to end the process"
        else:
            what = "raised a BaseException that is not an Exception"
        message = f"{error!r}: the executor {what}; return a Failure or raise an Exception instead"
        _log.error("job %s run %s: %s", context.job_name, context.run_id, message)
        deliver(Outcome("failed", error_type=type(error).__name__, error_message=message))


def _raised(error: BaseException, outcome: str = "failed", empty: str = "") -> Outcome:
    return Outcome(
        outcome, error_type=type(error).__name__, error_message=str(error) or empty, exception=error
    )


def _cancel_outcome(cancellation: Cancellation) -> str:
    return "timed_out" if cancellation.reason == TIMEOUT_REASON else "cancelled"


# -- the supervisor ----------------------------------------------------------------------------
# One thread that watches the executor calls running on their callers' threads (handing each run
# to another thread would cost two thread switches a run). It sleeps until the first deadline or
# the end of a cancelled call's grace; a call that starts or ends wakes it only when its deadline
# is sooner, and a cancellation (a :class:`SupervisedCancellation` tells it) always does.

TIMEOUT_REASON = "timeout"


class SupervisedCancellation(Cancellation):
    """A run's cancellation that tells the supervisor the moment it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self._watch: _Watch | None = None

    def cancel(self, reason: str) -> None:
        super().cancel(reason)
        _SUPERVISOR.cancelled(self)


@dataclass(slots=True, eq=False)  # eq=False: hashed by identity, in the supervisor's set
class _Watch:
    cancellation: SupervisedCancellation
    deadline: float | None
    grace: float
    on_stuck: Callable[[], None]
    cancelled_at: float | None = None
    stuck: bool = False

    def _due(self) -> float:
        if self.stuck:
            return math.inf
        if self.cancelled_at is not None:
            return self.cancelled_at + self.grace
        return math.inf if self.deadline is None else self.deadline


class _Supervisor:
    def __init__(self) -> None:
        # Reentrant: a timeout is cancelled under the lock (so a call that has ended is never
        # cancelled after it), and the cancellation tells this supervisor.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._watches: set[_Watch] = set()
        self._wake_at = math.inf
        """When the thread next looks by itself (monotonic); -inf while it is looking."""
        self._thread: threading.Thread | None = None

    def watch(self, watched: _Watch) -> _Watch:
        with self._lock:
            self._watches.add(watched)
            watched.cancellation._watch = watched
            if watched.cancellation.cancelled:
                watched.cancelled_at = time.monotonic()
            self._wake_if_sooner(watched)
        return watched

    def release(self, watched: _Watch) -> bool:
        with self._lock:
            self._watches.discard(watched)
            watched.cancellation._watch = None
            return watched.stuck

    def cancelled(self, cancellation: SupervisedCancellation) -> None:
        with self._lock:
            watched = cancellation._watch
            if watched is None or watched.cancelled_at is not None:
                return
            watched.cancelled_at = time.monotonic()
            self._wake_if_sooner(watched)

    def _wake_if_sooner(self, watched: _Watch) -> None:
        if watched._due() >= self._wake_at:
            return
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._serve, name="jobhost-supervisor", daemon=True
            )
            self._thread.start()
        self._changed.notify()

    def _serve(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                declared: list[Callable[[], None]] = []
                for watched in [w for w in self._watches if w._due() <= now]:
                    if watched.cancelled_at is None:
                        watched.cancellation.cancel(TIMEOUT_REASON)  # its grace starts now
                    else:
                        watched.stuck = True
                        declared.append(watched.on_stuck)
                if not declared:
                    wake_at = min((w._due() for w in self._watches), default=math.inf)
                    self._wake_at = wake_at
                    self._changed.wait(None if wake_at == math.inf else wake_at - now)
                    self._wake_at = -math.inf
                    continue
            # Outside the lock: ``on_stuck`` is the host's code, and takes the host's locks.
            for on_stuck in declared:
                try:
                    on_stuck()
                except Exception:
                    _log.exception("declaring a run stuck failed")


_SUPERVISOR = _Supervisor()


# -- daemon threads ----------------------------------------------------------------------------
# Starting a thread costs more than a short run, so a thread that finishes a call waits for the
# next one; one idle for a minute ends. Daemons: code that never returns cannot hold the process
# open at exit, as a ``ThreadPoolExecutor``'s threads, joined at exit, would.

_host_log = logging.getLogger("jobhost.host")
_IDLE_THREAD_SECONDS = 60.0

_Inbox = queue.SimpleQueue["tuple[str, Callable[[], object]] | None"]


class DaemonThreads:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Inbox] = []
        self._closed = False

    def start(self, name: str, work: Callable[[], object]) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put((name, work))

    def close(self) -> None:
        """End the idle threads now, and each busy one when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)

    def _serve(self, inbox: _Inbox) -> None:
        current = threading.current_thread()
        while True:
            try:
                handed = inbox.get(timeout=_IDLE_THREAD_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # handed work just now: it is in the inbox
            if handed is None:
                return
            name, work = handed
            current.name = name
            try:
                work()
            except Exception:
                # The thread goes on serving: one that ended here would leave its inbox idle,
                # and the next call handed to it would never run.
                _host_log.exception("a call on thread %s raised", name)
            finally:
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._idle.append(inbox)
            if closed:
                return


# -- a run's result ----------------------------------------------------------------------------
# A run's ``Success`` value as the ledger keeps it: JSON text of at most :data:`RESULT_LIMIT`
# bytes. A value JSON has no form for is kept as its ``repr``; text over the limit becomes
# ``{"truncated": true, "length": N, "head": "..."}``, still valid JSON.

RESULT_LIMIT = 4096

_OPTIONS = orjson.OPT_NON_STR_KEYS
# reprlib bounds the work of a repr of containers however large they are; an object's own
# ``__repr__`` is cut after the fact.
_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxstring = _REPR.maxother = RESULT_LIMIT
for _name in ("maxdict", "maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdeque", "maxarray"):
    setattr(_REPR, _name, 100)


def result_json(value: Any) -> str | None:
    """``value`` as bounded JSON text; ``None`` for ``None`` (a run that returned nothing)."""
    if value is None:
        return None
    try:
        text = orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, RecursionError):
        text = _repr_json(value)
    if len(text) <= RESULT_LIMIT:
        return text.decode()
    return _truncated(text)


def _repr_json(value: Any) -> bytes:
    try:
        text = _REPR.repr(value)
    except Exception as error:  # a broken __repr__ must not cost the run its record
        text = f"<{type(value).__name__}: repr raised {type(error).__name__}>"
    # A __repr__ may hand back lone surrogates, which no JSON text can hold.
    return orjson.dumps(text.encode("utf-8", "backslashreplace").decode())


def _truncated(text: bytes) -> str:
    head = text[: RESULT_LIMIT - 64].decode(errors="ignore")
    while True:
        note = orjson.dumps({"truncated": True, "length": len(text), "head": head})
        excess = len(note) - RESULT_LIMIT
        if excess <= 0:
            return note.decode()
        # Escapes make the note longer than its head; each pass drops at least the excess.
        head = head[: max(len(head) - excess, 0)]
