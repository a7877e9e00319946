"""The one path every run takes, whatever started it: execute, record, retry, report.

The ledger is written first and must succeed (it is retried while the store is away: an outcome
is never dropped); metrics and the audit sinks come after, from queues of their own
(:mod:`jobhost.envelope.reporting`), and can only warn.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

from jobhost_contracts import (
    AuditSink,
    Cancellation,
    JobContext,
    RunAuditRecord,
    TriggerSource,
    UnitCounts,
)
from jobhost_contracts.units import UnitTally
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from jobhost.catalog import JobSpec
from jobhost.clock import Clock
from jobhost.config import redact_text, storable_text
from jobhost.envelope.execution import Outcome, execute_executor, execute_here
from jobhost.envelope.joblogger import job_logger
from jobhost.envelope.recording import Executed, Finished, Recorded, settle, write_outcomes
from jobhost.envelope.reporting import Reporter
from jobhost.envelope.retries import next_attempt
from jobhost.envelope.run_times import run_times
from jobhost.envelope.runlog import RunLog, RunLogWriter, running
from jobhost.envelope.telemetry import Telemetry
from jobhost.records import Claim, Finish, LogWrites, occurrence_text
from jobhost.records import Outcome as LedgerOutcome
from jobhost.store import Store, StoreError
from jobhost.store.retrying import StoreRetry

__all__ = ["Executed", "RunEnvelope"]

_log = logging.getLogger("jobhost.envelope")
_STORE_RETRY_SECONDS = (0.5, 1, 2, 5, 10)


class RunEnvelope:
    """Runs claims for one host."""

    def __init__(
        self,
        store: Store,
        *,
        host_id: str,
        clock: Clock,
        grace: timedelta,
        telemetry: Telemetry,
        sinks: Sequence[AuditSink] = (),
        sink_timeout: timedelta = timedelta(seconds=5),
        stopping: Callable[[], bool] = lambda: False,
        store_time: Clock | None = None,
        outcome_time: Clock | None = None,
        store_retry: Sequence[float] = _STORE_RETRY_SECONDS,
        run_logs: RunLogWriter | None = None,
    ) -> None:
        self._store = store
        self._host_id = host_id
        self._clock = clock
        self._grace = grace
        self._telemetry = telemetry
        self._sink_timeout = sink_timeout.total_seconds()
        self._reporter = Reporter(sinks, telemetry, self._sink_timeout)
        self._stopping = stopping
        waits = tuple(store_retry)
        self._store_retry = StoreRetry(
            what="recording a run",
            waits=waits,
            retry_on=lambda error: isinstance(error, StoreError),
            max_attempts=len(waits) + 1,
            # A stopping host tries a few times, not the whole list: its grace is short.
            give_up=lambda tries: stopping() and tries >= 3,
        )
        self._run_logs = run_logs
        self._store_time = store_time
        """Stands in for the store's clock (tests); None: the database's time on PostgreSQL."""
        self._outcome_time = outcome_time or store_time
        """What stamps recorded outcomes: a host's estimate of the store's time from its turns'
        readings saves each recording a read of the clock."""

    def run(self, claim: Claim, spec: JobSpec, cancellation: Cancellation) -> Outcome:
        """Execute the claim inside its span, then record it everywhere (one run, in order)."""
        executed = self.execute(claim, spec, cancellation)
        self._record(Finished(claim, spec, executed))
        # A run in a command ends with its process: its reports go out before it returns.
        self.flush_reports()
        return executed.outcome

    def flush_reports(self, timeout: float | None = None) -> bool:
        """Wait until the reports queued so far are delivered (by default, for as long as two
        sink timeouts and a second); ``False`` when some were still on their way."""
        return self._reporter.drain(2 * self._sink_timeout + 1 if timeout is None else timeout)

    def execute(
        self,
        claim: Claim,
        spec: JobSpec,
        cancellation: Cancellation,
        *,
        on_stuck: Callable[[Outcome], None] | None = None,
    ) -> Executed:
        """Run the executor inside the run's span; the span ends with the outcome.

        With ``on_stuck`` (a host's worker), the executor runs on this thread and a call that
        ignores its cancellation keeps it: ``on_stuck`` hears of it, and the outcome comes once
        the call ends (see :func:`execute_here`; ``cancellation`` must then be a
        ``SupervisedCancellation``). Without, it runs on a thread of its own, given up on after
        the grace period."""
        attributes: dict[str, str | int] = {
            "jobhost.job.name": claim.job_name,
            "jobhost.job.module": spec.module,
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
            run_log = self._open_log(claim)
            began = self._clock()
            outcome = self._execute(claim, spec, cancellation, tally, run_log, on_stuck=on_stuck)
            ended = self._clock()
            units = tally.counts()
            if span.is_recording():
                _close_span(span, outcome, units)
        return Executed(outcome, trace_id, units, began=began, ended=ended, run_log=run_log)

    @contextmanager
    def finishing_logs(self, executed: Sequence[Executed]) -> Iterator[LogWrites]:
        """The last log lines of ended runs, to write in the transaction that records their
        outcomes (which must commit inside the block), so that whoever sees a run finished sees
        all its lines."""
        if self._run_logs is None:
            yield LogWrites()
            return
        logs = [e.run_log for e in executed if e.run_log is not None]
        with self._run_logs.finishing(logs) as writes:
            yield writes

    def run_times(
        self, claim: Claim, executed: Executed, written_at: datetime
    ) -> tuple[datetime, datetime]:
        """When the executor started and ended, on the store's clock (see :func:`run_times`)."""
        return run_times(
            claim.started_at, executed.began, executed.ended, written_at, self._clock()
        )

    def ledger_outcome(
        self, claim: Claim, spec: JobSpec, executed: Executed, finished_at: datetime
    ) -> LedgerOutcome:
        """What the ledger is told about the run, with the retry its policy asks for."""
        outcome = executed.outcome
        retry = next_attempt(
            spec.declaration.retry,
            outcome.outcome,
            job_name=claim.job_name,
            occurrence=claim.occurrence,
            attempt=claim.attempt,
            idempotency_key=claim.idempotency_key,
            requested_by=claim.requested_by,
            reason=claim.reason,
            at=finished_at,
            backfill_id=claim.backfill_id,
            attempt_base=claim.attempt_base,
        )
        started_at, ended_at = self.run_times(claim, executed, finished_at)
        return LedgerOutcome(
            run_id=claim.run_id,
            job_name=claim.job_name,
            started_at=started_at,
            end=Finish(
                outcome=outcome.outcome,
                finished_at=ended_at,
                error_type=outcome.error_type,
                error_message=_redacted(outcome.error_message),
                trace_id=executed.trace_id,
                result=outcome.result,
            ),
            retry=retry,
            units=executed.units,
            awaited=claim.source == "manual",
            backfill_id=claim.backfill_id,
            occurrence=claim.occurrence,
        )

    def report(
        self,
        claim: Claim,
        spec: JobSpec,
        executed: Executed,
        finished_at: datetime,
        verdict: str | None = None,
        *,
        started_at: datetime | None = None,
    ) -> None:
        """Queue the metrics and audit records of a recorded run (delivered off this thread);
        ``verdict`` is the ledger's outcome when another replica's differs from this host's, so
        the audit never contradicts the ledger. With ``started_at``, the run's times are the
        ledger's (``started_at``, ``finished_at``); without, ``finished_at`` is when the
        outcome was written and the executor's times are derived from it."""
        outcome = executed.outcome
        final = verdict or outcome.outcome
        if started_at is None:
            started_at, finished_at = self.run_times(claim, executed, finished_at)
        duration = max((finished_at - started_at).total_seconds(), 0.0)
        entry = RunAuditRecord(
            job_name=claim.job_name,
            module=spec.module,
            run_id=claim.run_id,
            occurrence=claim.occurrence,
            attempt=claim.attempt,
            source=claim.source,
            host_id=self._host_id,
            outcome=final,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=round(duration * 1000),
            error_type=outcome.error_type,
            error_message=_redacted(outcome.error_message),
            trace_id=executed.trace_id,
            units=executed.units,
            backfill_id=claim.backfill_id,
            result=outcome.result,
        )
        self._reporter.submit(entry)

    def _open_log(self, claim: Claim) -> RunLog | None:
        if self._run_logs is None:
            return None
        return self._run_logs.open(claim.run_id, claim.job_name, claim.attempt)

    def _execute(
        self,
        claim: Claim,
        spec: JobSpec,
        cancellation: Cancellation,
        tally: UnitTally,
        run_log: RunLog | None,
        *,
        on_stuck: Callable[[Outcome], None] | None,
    ) -> Outcome:
        context = JobContext(
            job_name=claim.job_name,
            run_id=claim.run_id,
            occurrence=claim.occurrence,
            attempt=claim.attempt,
            source=TriggerSource(claim.source),
            idempotency_key=claim.idempotency_key,
            fencing_token=claim.fencing_token,
            config=spec.config,
            logger=job_logger(claim.job_name, run_log),
            cancellation=cancellation,
            state=self._store.job_state(
                claim.job_name,
                claim.fencing_token,
                self._clock,
                run_id=claim.run_id,
                host_id=self._host_id,
                store_time=self._store_time,
            ),
            unit_tally=tally,
        )
        timeout = spec.declaration.timeout
        seconds = timeout.total_seconds() if timeout is not None else None
        grace = self._grace.total_seconds()
        if run_log is None:
            return _call(spec, context, seconds, grace, on_stuck)
        with running(run_log):
            outcome = _call(spec, context, seconds, grace, on_stuck)
        error = outcome.exception
        if error is not None and error.__traceback__ is not None and self._run_logs is not None:
            self._run_logs.note(run_log, time.time(), "ERROR", _stack(error))
        return outcome

    def record(self, batch: Sequence[Finished], *, isolate: bool = False) -> list[Recorded]:
        """Write ``batch``'s outcomes in one transaction (see :func:`write_outcomes`): the one
        write of every run, from a command or from the host's recorder; raises what the store
        raises."""
        return write_outcomes(
            self,
            self._store,
            self._host_id,
            batch,
            clock=self._clock,
            store_time=self._outcome_time,
            isolate=isolate,
        )

    def _record(self, finished: Finished) -> None:
        """Record one run, retrying while the store is away, then log and report it."""
        claim, executed = finished.claim, finished.executed
        try:
            (done,) = self._store_retry.call(
                lambda: self.record([finished]), what=f"recording run {claim.run_id}"
            )
        except StoreError as error:
            _log.error(
                "job %s run %s finished %s but the store could not record it: %s",
                claim.job_name,
                claim.run_id,
                executed.outcome.outcome,
                redact_text(str(error)),
            )
            started_at, finished_at = self.run_times(claim, executed, self._clock())
            self.report(claim, finished.spec, executed, finished_at, started_at=started_at)
            return
        settle(self, done)


def _call(
    spec: JobSpec,
    context: JobContext,
    timeout: float | None,
    grace: float,
    on_stuck: Callable[[Outcome], None] | None,
) -> Outcome:
    if on_stuck is None:
        return execute_executor(spec.executor, context, timeout=timeout, grace=grace)
    return execute_here(spec.executor, context, timeout=timeout, grace=grace, on_stuck=on_stuck)


def _close_span(span: Span, outcome: Outcome, units: UnitCounts | None) -> None:
    """The outcome on a span that is recorded (one with somewhere to go)."""
    span.set_attribute("jobhost.run.outcome", outcome.outcome)
    if units is not None:
        span.set_attributes(_unit_attributes(units))
    if outcome.exception is not None:
        # Redacted and bounded like the log: a span is exported to a collector.
        span.record_exception(
            outcome.exception,
            attributes={
                "exception.message": _redacted(str(outcome.exception)) or "",
                "exception.stacktrace": _redacted(_stack(outcome.exception)) or "",
            },
        )
    if outcome.outcome == "succeeded":
        span.set_status(Status(StatusCode.OK))
    else:
        span.set_status(
            Status(StatusCode.ERROR, _redacted(outcome.error_message) or outcome.outcome)
        )


def _unit_attributes(units: UnitCounts) -> dict[str, int]:
    return {
        "units.total": units.total,
        "units.succeeded": units.succeeded,
        "units.failed": units.failed,
        "units.skipped_already_done": units.skipped_already_done,
    }


def _redacted(message: str | None) -> str | None:
    # Bounded as well: the ledger and every audit sink get the same cut text, length kept.
    return storable_text(message)


def _stack(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))
