"""A run's states and its end: the outcome the ledger is told, the retry its policy asks for,
its reports.

A run's times are its executor's, read on the host's clock and moved to the store's by the
difference between the two when the outcome is written, kept within what the store saw: not
before the claim, not after the write (:func:`_run_times`).
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobhost_contracts import AuditSink, RetryPolicy, RunAuditRecord, UnitCounts

from jobhost.catalog import JobSpec
from jobhost.envelope.reporting import UNIT_RESULTS
from jobhost.envelope.runlog import RunLog, storable_text
from jobhost.records import Claim, Finish, RetriesFor, RetryRequest, RunRecord, new_run_id
from jobhost.records import Outcome as LedgerOutcome

if TYPE_CHECKING:
    from jobhost.envelope.reporting import Telemetry
    from jobhost.rules import FiringRules

__all__ = [
    "Finished",
    "Outcome",
    "Recorded",
    "Reporter",
    "ledger_outcome",
    "next_attempt",
    "retry_delay",
    "retrying_abandoned",
]

_log = logging.getLogger("jobhost.envelope")
_firing_log = logging.getLogger("jobhost.firing")  # where a host says what its upkeep found
_audit_log = logging.getLogger("jobhost.audit")
_people_log = logging.getLogger("jobhost.run")


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str
    value: Any = None
    result: str | None = None
    """``value`` as the ledger keeps it (:func:`~jobhost.envelope.envelope.result_json`)."""
    error_type: str | None = None
    error_message: str | None = None
    exception: BaseException | None = None
    stuck: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    claim: Claim
    spec: JobSpec
    outcome: Outcome
    trace_id: str | None = None
    units: UnitCounts | None = None
    """Counts of a run that fanned out over units (``context.fan_out``)."""
    began: datetime | None = None
    ended: datetime | None = None
    """The executor's own start and end, on this host's clock; None when it never ran."""
    run_log: RunLog | None = None


@dataclass(frozen=True, slots=True)
class Recorded:
    finished: Finished
    entry: LedgerOutcome
    recorded: bool
    """The row took this host's outcome."""
    verdict: str | None
    """The ledger's own outcome when it did not (``running``: the database refused the row)."""
    written_at: datetime


def next_attempt(
    policy: RetryPolicy, outcome: str, before: Claim | RunRecord, at: datetime
) -> RetryRequest | None:
    """The attempt after ``before`` (the same occurrence, key and backfill) if the policy asks
    for one. The budget counts from ``attempt_base``: a backfill's runs have their own."""
    tried = before.attempt - before.attempt_base
    if outcome not in policy.retry_on or tried >= policy.max_attempts:
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


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> timedelta:
    """Backoff before attempt ``attempt + 1``: doubled each time, capped, spread by jitter."""
    base = policy.backoff.total_seconds() * (2 ** max(attempt - 1, 0))
    capped = min(base, policy.backoff_max.total_seconds())
    spread = capped * max(policy.jitter, 0.0)
    draw = (rng or random).uniform(-spread, spread)
    return timedelta(seconds=max(capped + draw, 0.0))


def retrying_abandoned(telemetry: Telemetry, rules: FiringRules, *, why: str) -> RetriesFor:
    """For runs just recorded ``abandoned``: count and log each, and say their retries."""

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


def ledger_outcome(finished: Finished, finished_at: datetime, host_now: datetime) -> LedgerOutcome:
    """``finished`` as the ledger keeps it, written at ``finished_at`` (``host_now`` on the
    host's clock), with its retry."""
    claim, outcome = finished.claim, finished.outcome
    retry = next_attempt(finished.spec.declaration.retry, outcome.outcome, claim, finished_at)
    started_at, ended_at = _run_times(
        claim.started_at, finished.began, finished.ended, finished_at, host_now
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
            trace_id=finished.trace_id,
            result=outcome.result,
        ),
        retry=retry,
        units=finished.units,
        awaited=claim.source == "manual",
        backfill_id=claim.backfill_id,
        occurrence=claim.occurrence,
    )


def _run_times(
    claimed_at: datetime,
    began: datetime | None,
    ended: datetime | None,
    written_at: datetime,
    host_now: datetime,
) -> tuple[datetime, datetime]:
    """(start, end) on the store's clock; a run that never ran spans its claim to its write."""
    if began is None or ended is None:
        return claimed_at, max(written_at, claimed_at)
    skew = written_at - host_now
    start = min(max(began + skew, claimed_at), written_at)
    end = min(max(ended + skew, start), max(written_at, start))
    return start, end


# -- reporting ---------------------------------------------------------------------------------
# Each destination has a lane of its own: a bounded queue drained by one thread. The built-in
# lane records the metrics and writes the JSON audit line; every sink a module adds, whatever it
# says of itself, gets a lane, so a slow or hanging sink delays only its own records. A full lane
# drops the record, counts it on ``jobhost.audit.dropped`` and warns at most once a minute. A
# lane's thread ends after a while without work, so an idle host holds no thread for it.

LANE_CAPACITY = 10_000  # at 1,000 runs a second, ten seconds of reporting
_IDLE_SECONDS = 10.0
_DROP_WARNING_SECONDS = 60.0


class Reporter:
    def __init__(
        self,
        sinks: Sequence[AuditSink],
        telemetry: Telemetry,
        timeout: float,
        *,
        capacity: int = LANE_CAPACITY,
    ) -> None:
        self._telemetry = telemetry
        self._lanes = [_Lane("json-log", self._report_inline, capacity, self._dropped)]
        for sink in sinks:
            bounded = BoundedSink(sink, timeout, self._failed)
            self._lanes.append(_Lane(bounded.name, bounded.record, capacity, self._dropped))

    def submit(self, entry: RunAuditRecord) -> None:
        for lane in self._lanes:
            lane.offer(entry)

    def drain(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(lane.drain(deadline) for lane in self._lanes)

    def _report_inline(self, entry: RunAuditRecord) -> None:
        labels = {"job": entry.job_name, "outcome": entry.outcome}
        duration = max((entry.finished_at - entry.started_at).total_seconds(), 0.0)
        self._telemetry.runs.add(1, labels)
        # One duration histogram per job, not per outcome: it bounds the series a job costs.
        self._telemetry.duration.record(duration, {"job": entry.job_name})
        if entry.occurrence is not None:
            lag = (entry.started_at - entry.occurrence).total_seconds()
            self._telemetry.lag.record(max(lag, 0.0), {"job": entry.job_name})
        if (units := entry.units) is not None:
            for result in UNIT_RESULTS:
                count = getattr(units, result)
                self._telemetry.units.add(count, {"job": entry.job_name, "result": result})
        # One JSON line per finished run on ``jobhost.audit``, and for an unsuccessful run a
        # WARNING a person reads on ``jobhost.run`` (a pipeline reading JSON lines stays JSON).
        try:
            fields = {name: getattr(entry, name) for name in _AUDIT_FIELDS}
            if entry.result is not None:
                # The line carries the value, not its text: a log pipeline reads it as JSON.
                fields["result"] = json.loads(entry.result)
            _audit_log.info(_LINE.encode({"event": "run.finished", **fields}))
            if entry.outcome in UNSUCCESSFUL:
                _people_log.warning(
                    "job %s run %s %s (attempt %d of a %s run): %s",
                    entry.job_name,
                    entry.run_id,
                    entry.outcome,
                    entry.attempt,
                    entry.source,
                    _first_line(entry),
                )
        except Exception as error:
            self._failed("json-log", entry, f"{type(error).__name__}: {error}")

    def _failed(self, name: str, entry: RunAuditRecord, error: str) -> None:
        self._telemetry.sink_failures.add(1, {"sink": name})
        _log.warning(
            "audit sink %s failed for run %s of %s: %s; the outcome (%s) stands",
            name,
            entry.run_id,
            entry.job_name,
            error,
            entry.outcome,
        )

    def _dropped(self, lane: _Lane, warn: bool) -> None:
        self._telemetry.audit_dropped.add(1, {"sink": lane.name})
        if warn:
            _log.warning(
                "audit sink %s is %d records behind: dropped %d record(s) so far "
                "(the ledger has every run)",
                lane.name,
                lane.capacity,
                lane.dropped,
            )


class _Lane:
    def __init__(
        self,
        name: str,
        deliver: Callable[[RunAuditRecord], None],
        capacity: int,
        on_drop: Callable[[_Lane, bool], None],
    ) -> None:
        self.name = name
        self.capacity = capacity
        self._deliver = deliver
        self._on_drop = on_drop
        self._queue: queue.Queue[RunAuditRecord] = queue.Queue(capacity)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self._warned_at = -_DROP_WARNING_SECONDS

    def offer(self, entry: RunAuditRecord) -> None:
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1
            now = time.monotonic()
            warn = now - self._warned_at >= _DROP_WARNING_SECONDS
            if warn:
                self._warned_at = now
            self._on_drop(self, warn)
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"jobhost-report-{self.name}", daemon=True
                )
                self._thread.start()

    def drain(self, deadline: float) -> bool:
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def _run(self) -> None:
        while True:
            try:
                entry = self._queue.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    # Under the lock that ``offer`` starts a thread with: an entry queued
                    # before this check is delivered by this thread, one after by a new one.
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            try:
                self._deliver(entry)
            except Exception:  # reporting must never end the lane
                _log.exception("audit sink %s: reporting run %s failed", self.name, entry.run_id)
            finally:
                self._queue.task_done()


# -- the sinks ---------------------------------------------------------------------------------
# A sink that raises or hangs is reported with a warning and ``jobhost.audit.sink_failures``;
# the run's outcome is already in the ledger and stays what it is.

UNSUCCESSFUL = frozenset({"failed", "timed_out", "abandoned"})  # said to people too
_FIRST_LINE = 300


def _first_line(entry: RunAuditRecord) -> str:
    message = (entry.error_message or "").strip().splitlines()
    first = message[0] if message else "no message"
    if len(first) > _FIRST_LINE:
        first = f"{first[:_FIRST_LINE]}..."
    kind = entry.error_type
    # A business Failure's type says nothing its text does not; an exception's type does.
    return first if kind in {None, "Failure"} else f"{kind}: {first}"


class BoundedSink:
    """A module's sink, called in a thread of its own, given ``timeout`` seconds to answer; a
    hanging sink holds one thread (the next record waits for it), not one per record."""

    def __init__(
        self, sink: AuditSink, timeout: float, failed: Callable[[str, RunAuditRecord, str], None]
    ) -> None:
        self.name = str(getattr(sink, "name", type(sink).__name__))
        self._sink = sink
        self._timeout = timeout
        self._failed = failed
        self._busy: threading.Thread | None = None

    def record(self, entry: RunAuditRecord) -> None:
        if self._busy is not None:
            self._busy.join(self._timeout)
            if self._busy.is_alive():
                message = f"no answer within {self._timeout:g}s (an earlier record still holds it)"
                self._failed(self.name, entry, message)
                return
            self._busy = None
        errors: list[BaseException] = []

        def _target() -> None:
            try:
                self._sink.record(entry)
            except BaseException as error:  # a sink must never take the host down
                errors.append(error)

        worker = threading.Thread(target=_target, name=f"jobhost-audit-{self.name}", daemon=True)
        worker.start()
        worker.join(self._timeout)
        if worker.is_alive():
            self._busy = worker
            self._failed(self.name, entry, f"no answer within {self._timeout:g}s")
        elif errors:
            self._failed(self.name, entry, f"{type(errors[0]).__name__}: {errors[0]}")


def _plain(value: object) -> object:
    """A value JSON has no word for (the C encoder writes the rest)."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")


_LINE = json.JSONEncoder(sort_keys=True, default=_plain)
_AUDIT_FIELDS = tuple(f.name for f in dataclass_fields(RunAuditRecord))
