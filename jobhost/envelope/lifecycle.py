"""A run's end: the outcome the ledger is told, the retry its policy asks for, what follows.

Every run's outcome takes one write, :func:`finish` (its last log lines and its outcome in one
transaction, and the ledger's own word for any run this host no longer holds), whether the
host's recorder thread writes many runs at once or a command's run writes its one; then
:func:`settle` says what the ledger answered and queues the run's metrics and audit record.
The callers differ only in how long they keep trying while the store is away. Runs recorded
``abandoned`` (their host died) get their retries from the same policy
(:func:`retrying_abandoned`).

A run's times are its executor's: when it started and ended, not when the store heard of it.
The envelope reads the host's clock around the executor; the ledger keeps the store's clock
(PostgreSQL's on several replicas), so the host's readings are moved by the difference between
the two clocks, read when the outcome is written, and kept within what the store saw: not
before the claim, not after the write (:func:`run_times`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobhost_contracts import RetryPolicy, RunAuditRecord, UnitCounts

from jobhost.catalog import JobSpec
from jobhost.envelope.runlog import RunLog, RunLogWriter, storable_text
from jobhost.records import (
    Claim,
    Finish,
    LogWrites,
    RetriesFor,
    RetryRequest,
    RunRecord,
    new_run_id,
)
from jobhost.records import Outcome as LedgerOutcome

if TYPE_CHECKING:
    from jobhost.clock import Clock
    from jobhost.envelope.reporting import Reporter, Telemetry
    from jobhost.rules import FiringRules
    from jobhost.store import Store

__all__ = [
    "Executed",
    "Finished",
    "Outcome",
    "Recorded",
    "finish",
    "next_attempt",
    "report",
    "retry_delay",
    "retrying_abandoned",
    "run_times",
    "settle",
    "should_retry",
]

_log = logging.getLogger("jobhost.envelope")
_firing_log = logging.getLogger("jobhost.firing")  # where a host says what its upkeep found


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one run, before it reaches the ledger, the span and the metrics."""

    outcome: str
    value: Any = None
    result: str | None = None
    """``value`` as the ledger keeps it (:func:`~jobhost.envelope.envelope.result_json`)."""
    error_type: str | None = None
    error_message: str | None = None
    exception: BaseException | None = None
    stuck: bool = False


@dataclass(frozen=True, slots=True)
class Executed:
    """A run that has executed: its outcome and the trace it belongs to."""

    outcome: Outcome
    trace_id: str | None
    units: UnitCounts | None = None
    """Counts of a run that fanned out over units (``context.fan_out``)."""
    began: datetime | None = None
    ended: datetime | None = None
    """The executor's own start and end, on this host's clock; None when it never ran."""
    run_log: RunLog | None = None
    """The run's log lines not yet written, when the host keeps run logs."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A run whose executor is done, waiting for its outcome to reach the ledger."""

    claim: Claim
    spec: JobSpec
    executed: Executed


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the ledger said to one finished run's outcome."""

    finished: Finished
    entry: LedgerOutcome
    """The outcome as this host wrote (or tried to write) it."""
    recorded: bool
    """The row took this host's outcome."""
    verdict: str | None
    """The ledger's own outcome when it did not (``running``: the database refused the row)."""
    written_at: datetime


def finish(
    store: Store,
    host_id: str,
    batch: Sequence[Finished],
    *,
    run_logs: RunLogWriter | None,
    store_time: Clock | None,
    isolate: bool = False,
) -> list[Recorded]:
    """Write ``batch``'s outcomes, with the retries their policies ask for and their runs' last
    log lines, in one transaction; ``store_time`` stamps them when given (else the store's
    instant is read in the transaction).

    Raises what the store raises; ``isolate`` writes each row on its own, so a row the database
    refuses costs only itself (it comes back with the verdict ``running``).
    """
    with _finishing_logs(run_logs, [f.executed for f in batch]) as logs:
        done = store.record_finished(
            host_id,
            outcomes_at=lambda now: [_ledger_outcome(f, now, store.clock) for f in batch],
            logs=logs,
            clock=store.clock,
            store_time=store_time,
            isolate=isolate,
        )
    recorded, verdicts, now = done.recorded, done.verdicts, done.now
    return [
        Recorded(
            finished,
            entry,
            finished.claim.run_id in recorded,
            verdicts.get(finished.claim.run_id),
            now,
        )
        for finished, entry in zip(batch, done.entries, strict=True)
    ]


def settle(done: Recorded, reporter: Reporter, host_id: str) -> None:
    """Say what the ledger answered, and queue the run's metrics and audit record."""
    finished, entry = done.finished, done.entry
    claim = finished.claim
    outcome = finished.executed.outcome.outcome
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
        report(
            reporter,
            host_id,
            finished,
            started_at=entry.started_at or claim.started_at,
            finished_at=entry.end.finished_at,
            verdict=done.verdict,
        )
    except Exception:  # reporting must never undo a recorded outcome
        _log.exception("job %s run %s: reporting failed", claim.job_name, claim.run_id)


def report(
    reporter: Reporter,
    host_id: str,
    finished: Finished,
    *,
    started_at: datetime,
    finished_at: datetime,
    verdict: str | None = None,
) -> None:
    """Queue the metrics and audit records of a run (delivered off this thread); ``verdict`` is
    the ledger's outcome when another replica's differs from this host's, so the audit never
    contradicts the ledger."""
    claim, executed = finished.claim, finished.executed
    outcome = executed.outcome
    duration = max((finished_at - started_at).total_seconds(), 0.0)
    reporter.submit(
        RunAuditRecord(
            job_name=claim.job_name,
            module=finished.spec.module,
            run_id=claim.run_id,
            occurrence=claim.occurrence,
            attempt=claim.attempt,
            source=claim.source,
            host_id=host_id,
            outcome=verdict or outcome.outcome,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=round(duration * 1000),
            error_type=outcome.error_type,
            error_message=storable_text(outcome.error_message),
            trace_id=executed.trace_id,
            units=executed.units,
            backfill_id=claim.backfill_id,
            result=outcome.result,
        )
    )


def run_times(
    claimed_at: datetime,
    began: datetime | None,
    ended: datetime | None,
    written_at: datetime,
    host_now: datetime,
) -> tuple[datetime, datetime]:
    """(start, end) on the store's clock; ``host_now`` is the host's clock at ``written_at``.

    A run whose executor never ran (cancelled at shutdown) spans its claim to its write.
    """
    if began is None or ended is None:
        return claimed_at, max(written_at, claimed_at)
    skew = written_at - host_now
    start = min(max(began + skew, claimed_at), written_at)
    end = min(max(ended + skew, start), max(written_at, start))
    return start, end


def next_attempt(
    policy: RetryPolicy, outcome: str, before: Claim | RunRecord, at: datetime
) -> RetryRequest | None:
    """The attempt after ``before``, which ended ``outcome`` at ``at``, if the policy asks for
    one.

    It keeps the occurrence, the idempotency key and the backfill, so the retry is the same
    piece of work. The budget counts the attempts after ``attempt_base``: a backfill's runs of
    an occurrence have ``max_attempts`` of their own, whatever the schedule's attempts were.
    """
    tried = before.attempt - before.attempt_base
    if not should_retry(policy, outcome, tried):
        return None
    return RetryRequest(
        run_id=new_run_id(),
        job_name=before.job_name,
        occurrence=before.occurrence,
        attempt=before.attempt + 1,
        source="retry",
        idempotency_key=before.idempotency_key,
        requested_by=before.requested_by,
        reason=before.reason,
        not_before=at + retry_delay(policy, tried),
        backfill_id=before.backfill_id,
        attempt_base=before.attempt_base,
    )


def should_retry(policy: RetryPolicy, outcome: str, attempt: int) -> bool:
    return outcome in policy.retry_on and attempt < policy.max_attempts


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> timedelta:
    """Backoff before attempt ``attempt + 1``: doubled each time, capped, spread by jitter."""
    base = policy.backoff.total_seconds() * (2 ** max(attempt - 1, 0))
    capped = min(base, policy.backoff_max.total_seconds())
    spread = capped * max(policy.jitter, 0.0)
    draw = (rng or random).uniform(-spread, spread)
    return timedelta(seconds=max(capped + draw, 0.0))


def retrying_abandoned(telemetry: Telemetry, rules: FiringRules, *, why: str) -> RetriesFor:
    """What to do with runs just recorded ``abandoned``: count and log each, and say the
    retries their jobs' policies ask for (a fan-out's retry does only its units not done)."""

    def retries_for(gone: list[RunRecord], now: datetime) -> list[RetryRequest]:
        retries = []
        for run in gone:
            telemetry.runs.add(1, {"job": run.job_name, "outcome": "abandoned"})
            _firing_log.warning(
                "job %s run %s abandoned: host %s %s", run.job_name, run.id, run.host_id, why
            )
            policy = rules.retry_policy(run.job_name)
            retry = None if policy is None else next_attempt(policy, "abandoned", run, now)
            if retry is not None:
                retries.append(retry)
        return retries

    return retries_for


def _ledger_outcome(finished: Finished, finished_at: datetime, clock: Clock) -> LedgerOutcome:
    """What the ledger is told about the run, with the retry its policy asks for."""
    claim, executed = finished.claim, finished.executed
    outcome = executed.outcome
    retry = next_attempt(finished.spec.declaration.retry, outcome.outcome, claim, finished_at)
    started_at, ended_at = run_times(
        claim.started_at, executed.began, executed.ended, finished_at, clock()
    )
    return LedgerOutcome(
        run_id=claim.run_id,
        job_name=claim.job_name,
        started_at=started_at,
        end=Finish(
            outcome=outcome.outcome,
            finished_at=ended_at,
            error_type=outcome.error_type,
            error_message=storable_text(outcome.error_message),
            trace_id=executed.trace_id,
            result=outcome.result,
        ),
        retry=retry,
        units=executed.units,
        awaited=claim.source == "manual",
        backfill_id=claim.backfill_id,
        occurrence=claim.occurrence,
    )


@contextmanager
def _finishing_logs(
    run_logs: RunLogWriter | None, executed: Sequence[Executed]
) -> Iterator[LogWrites]:
    """The last log lines of ended runs, to write in the transaction that records their
    outcomes (which must commit inside the block), so that whoever sees a run finished sees
    all its lines."""
    if run_logs is None:
        yield LogWrites()
        return
    with run_logs.finishing([e.run_log for e in executed if e.run_log is not None]) as writes:
        yield writes
