"""A host's worker slots: the runs it holds, the workers executing them, and what waits.

The loop, the workers, the recorder and the heartbeat share this bookkeeping behind one lock;
every step that reads a count and then changes it is one hold of it. The slots count workers
(a stuck run's too); a run stays held, its lease renewed, until its outcome is in the ledger.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from jobhost_contracts import Cancellation

from jobhost.catalog import JobSpec
from jobhost.config import redact_text
from jobhost.envelope.envelope import DaemonThreads, RunEnvelope, SupervisedCancellation
from jobhost.envelope.lifecycle import Finished, Outcome
from jobhost.records import Claim
from jobhost.rules import lease_for
from jobhost.store import Store
from jobhost.store.engine import StoreRetry, is_store_down

__all__ = [
    "MOST_PER_WORKER",
    "AheadQueue",
    "HostStatus",
    "OutcomeRecorder",
    "WorkerSlots",
]

_log = logging.getLogger("jobhost.host")  # the host's lines, wherever they are written


class WorkerSlots:
    def __init__(
        self,
        workers: int,
        *,
        execute: _Execute,
        record: Callable[[Finished], None],
        wake: Callable[[], None],
        stopping: Callable[[], bool],
        status: HostStatus,
        lease_duration: timedelta,
        store: Store,
        host_id: str,
    ) -> None:
        self._workers = workers
        self._threads = DaemonThreads()
        self._execute_run = execute
        self._record = record
        self._wake = wake
        self._stopping = stopping
        self._status = status
        self._lease_duration = lease_duration
        self._store = store
        self._host_id = host_id
        self._lock = threading.Lock()
        self._running: dict[str, HeldRun] = {}
        self._executing = 0
        """Runs whose executor holds a worker (stuck ones too): what the slots count."""
        self._ahead: AheadQueue[HeldRun] = AheadQueue(workers)
        self._saturated = False
        """The last turn left due work for want of a slot: a freed slot wakes the loop."""
        self._waiting: set[str] = set()
        """Jobs whose due work waits for a run of theirs to be recorded: its record wakes the
        loop. Any other record or freed slot does not, as no claim could succeed sooner."""

    # -- the loop's turn ----------------------------------------------------------------------

    def free(self) -> tuple[int, int, int]:
        """Free workers, room in the claim-ahead queue, and the slot kept for manual runs."""
        if self._stopping():
            return 0, 0, 0
        with self._lock:
            running = self._executing
            # Only a host that is behind claims ahead: at a due instant every replica first takes
            # what its workers can start.
            ahead = self._ahead.room() if self._saturated else 0
        pool = self._workers
        return max(pool - running, 0), ahead, 1 if running < pool + 1 else 0

    def submit(self, claim: Claim, spec: JobSpec, *, start_at: float | None = None) -> None:
        """Hold a claimed run and start it on a free worker, or queue it for the next one;
        a run claimed before its occurrence starts no sooner than ``start_at`` (monotonic)."""
        lease = lease_for(spec.declaration, self._lease_duration)
        item = HeldRun(claim, spec, SupervisedCancellation(), lease, start_at=start_at)
        with self._lock:
            self._running[claim.run_id] = item
            # A person's run takes the slot kept for it; other runs wait for a free worker.
            if self._executing >= self._workers and claim.source != "manual":
                self._ahead.append(item)
                return
            self._executing += 1
        # DEBUG: at hundreds of runs a second, the audit line per finished run is the record.
        _log.debug(
            "job %s: run %s started (%s, occurrence %s, attempt %d)",
            claim.job_name,
            claim.run_id,
            claim.source,
            claim.occurrence,
            claim.attempt,
        )
        self._threads.start("jobhost-run", lambda: self._work(item))

    def turned(self, saturated: bool, waiting: Set[str]) -> bool:
        """Note what the turn left waiting; true if the loop should turn again at once (what
        would have woken it ended during the turn)."""
        with self._lock:
            self._saturated = saturated
            self._waiting |= waiting
            holding = {item.claim.job_name for item in self._running.values()}
            ended = saturated and self._executing < self._workers
            ended |= saturated and self._ahead.bound > 0 and self._ahead.low()
            ended |= any(name not in holding for name in waiting)
        return ended

    def behind(self) -> bool:
        with self._lock:
            return self._saturated

    def held(self) -> dict[str, Cancellation]:
        with self._lock:
            return {
                run_id: item.cancellation
                for run_id, item in self._running.items()
                if not item.finished
            }

    # -- workers, the recorder, the heartbeat -------------------------------------------------

    def recorded(self, claim: Claim, outcome: str) -> bool:
        """A run's outcome is in the ledger; true if that should wake the loop."""
        with self._lock:
            self._running.pop(claim.run_id, None)
            # A failed run may have left a retry; a waiting job may start now (a backfill's
            # next occurrence: the ticker says, see Ticker.run_ended).
            wake = outcome != "succeeded" or claim.job_name in self._waiting
            if claim.backfill_id is not None:
                self._waiting.discard(claim.job_name)
        return wake

    def runs(self) -> list[HeldRun]:
        with self._lock:
            return list(self._running.values())

    # -- shutdown -----------------------------------------------------------------------------

    def release_queued(self) -> None:
        """Give the runs queued ahead back to the store, due at once for any host (with the store
        away, their leases run out and they are recorded abandoned)."""
        with self._lock:
            queued = list(self._ahead)
            self._ahead.clear()
            for item in queued:
                self._running.pop(item.claim.run_id, None)
        if not queued:
            return
        ids = [item.claim.run_id for item in queued]
        try:
            released = self._store.release_runs(self._host_id, ids, self._store.clock)
        except Exception as error:
            _log.warning(
                "could not give back %d runs claimed but not started (%s); they are recorded "
                "abandoned once their leases expire",
                len(ids),
                redact_text(str(error).splitlines()[0] if str(error) else type(error).__name__),
            )
            return
        _log.info("gave back %d runs claimed but not started: pending, due now", len(released))

    def cancel_all(self, grace: float) -> None:
        """Cancel every run held and wait up to ``grace`` seconds for their executors; record
        cancelled those still running then."""
        for item in self.runs():
            item.cancellation.cancel("shutdown")
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._lock:
                if all(item.finished for item in self._running.values()):
                    break
            time.sleep(0.05)
        with self._lock:
            leftovers = [i for i in self._running.values() if not i.finished]
            for item in leftovers:
                item.finished = True
            self._executing = 0
        self._threads.close()
        for item in leftovers:
            shutdown = Outcome(
                "cancelled",
                error_type="Shutdown",
                error_message=f"host shut down; the executor did not stop within {grace:g}s",
            )
            self._record(Finished(item.claim, item.spec, shutdown))

    # -- a run on a worker --------------------------------------------------------------------

    def _work(self, first: HeldRun) -> None:
        item: HeldRun | None = first
        while item is not None:
            item = self._execute(item)

    def _execute(self, item: HeldRun) -> HeldRun | None:
        """Execute one run and hand its outcome over; return the queued run to start next. A run
        claimed before its occurrence starts at it (shutdown does not cut that short wait)."""
        if item.start_at is not None and (wait := item.start_at - time.monotonic()) > 0:
            time.sleep(wait)
        claim = item.claim
        current = threading.current_thread()
        current.name = f"job:{claim.job_name}"  # what a thread dump of a stuck host shows
        began = time.monotonic()
        try:
            finished = self._execute_run(
                claim,
                item.spec,
                item.cancellation,
                on_stuck=lambda verdict: self._stuck(item, verdict),
            )
        except Exception as error:
            _log.exception("job %s: run %s could not be executed", claim.job_name, claim.run_id)
            failed = Outcome("failed", error_type=type(error).__name__, error_message=str(error))
            finished = Finished(claim, item.spec, failed)
        current.name = "jobhost-run"
        following: HeldRun | None = None
        with self._lock:
            self._ahead.timed(time.monotonic() - began)
            was_stuck, item.stuck = item.stuck is not None, None
            if was_stuck:
                self._status.stuck -= 1
            if item.finished:
                return None  # shutdown already recorded it cancelled
            item.finished = True
            self._executing -= 1
            # Handed over while the lock is held: a shutdown that sees the run finished stops
            # the recorder only after its outcome is queued, never before.
            self._record(finished)
            if self._ahead and not self._stopping():
                following = self._ahead.popleft()
                self._executing += 1
            # Due work left behind, and the queue half empty (or no queue): time for a claim.
            wake = self._saturated and self._ahead.low()
        if was_stuck:
            _log.info("job %s run %s: its stuck code ended", claim.job_name, claim.run_id)
        if wake or was_stuck:
            self._wake()
        if following is not None:
            _log.debug("job %s: run %s started", following.claim.job_name, following.claim.run_id)
        return following

    def _stuck(self, item: HeldRun, verdict: Outcome) -> None:
        """Note the run stuck: the host's heartbeats say so in the ledger until it ends."""
        with self._lock:
            if item.finished:
                return  # it ended meanwhile, or shutdown gave up on it
            item.stuck = (
                f"stuck: {verdict.error_message}; its thread still runs, so the run keeps "
                "its slot and lease until it ends"
            )
            self._status.stuck += 1


class _Execute(Protocol):
    def __call__(
        self,
        claim: Claim,
        spec: JobSpec,
        cancellation: Cancellation,
        *,
        on_stuck: Callable[[Outcome], None],
    ) -> Finished: ...


@dataclass
class HeldRun:
    claim: Claim
    spec: JobSpec
    cancellation: Cancellation
    lease: timedelta
    finished: bool = False
    """The executor is done (or given up on); the outcome is on its way to the ledger."""
    stuck: str | None = None
    """While its executor ignores cancellation: what the ledger says of the run."""
    start_at: float | None = None
    """When (monotonic) a run claimed before its occurrence may start; None: at once."""


@dataclass
class HostStatus:
    """What the HTTP probes read: is the loop turning, is the store reachable."""

    started: float = field(default_factory=time.monotonic)
    last_tick: float | None = None
    store_ok: bool = False
    catalog_ok: bool = True
    ticks: int = 0
    synced: bool = False
    """Registered and the catalog written to the store: ready to fire."""
    lag: float = 0.0
    """Seconds the oldest due, unclaimed occurrence waited at the last turn."""
    stuck: int = 0
    stuck_limit: int = 1
    turn_started: float | None = None
    """When the loop's turn under way began (monotonic); None between turns."""
    stall_after: float = 15.0
    """Seconds one turn may take before the host says it is not ready."""
    hung_after: float = 145.0
    """Seconds one turn may take before the host says it is not alive (past every deadline)."""

    @property
    def too_many_stuck(self) -> bool:
        return self.stuck >= self.stuck_limit

    def turn_age(self, now: float) -> float:
        """Seconds the turn under way has taken so far; 0 between turns."""
        started = self.turn_started
        return 0.0 if started is None else now - started


# -- claim ahead ------------------------------------------------------------------------------
# At hundreds of runs a second a claim limited to the free workers takes a handful of runs per
# transaction. So a turn may claim more of what is due *now* than it has free workers; the rest
# wait here for the next free worker, no turn needed. A queued run is already claimed, so the
# queue holds what the workers should start within :data:`HORIZON` seconds at the recent pace.
# Not thread-safe: the host calls it under its lock.

HORIZON = 0.2
MOST_PER_WORKER = 16
"""Runs that may wait per worker, however short the runs (8 made claims half as large; 32 did
no better)."""
_WEIGHT = 0.1
"""Weight of the newest duration in the running mean: it follows a change within tens of runs."""

T = TypeVar("T")


class AheadQueue(deque[T]):
    """The runs claimed ahead, oldest first, and the room a claim has for more."""

    def __init__(self, workers: int) -> None:
        super().__init__()
        self._workers = workers
        self._most = MOST_PER_WORKER * workers
        self._mean: float | None = None

    @property
    def bound(self) -> int:
        """Runs that may wait now; none before a run was timed."""
        if self._mean is None:
            return 0
        if self._mean <= 0:
            return self._most
        return min(self._most, math.floor(HORIZON * self._workers / self._mean))

    def room(self) -> int:
        return max(self.bound - len(self), 0)

    def low(self) -> bool:
        """Half the room or more is free: worth a claim turn."""
        return len(self) <= self.bound // 2

    def timed(self, seconds: float) -> None:
        mean = self._mean
        self._mean = seconds if mean is None else mean + _WEIGHT * (seconds - mean)


# -- the recorder ------------------------------------------------------------------------------
# Finished runs are written in batches, from one thread, and never dropped: while the store is
# away the recorder keeps them (still leased) and tries again; only a stopping host gives up.
# Starting due runs comes first: while the host is behind, the recorder holds its write (at most
# :data:`HOLD_SECONDS`) until a moment before a claim would next read the job's row
# (``Claim.record_by``), never for a run without that instant.

_BATCH = 500
_LATER_SECONDS = 30
_BUSY_SECONDS = 0.05
_GATHER_SECONDS = 0.005
HOLD_SECONDS = 0.5
_HOLD_STEP = 0.01
_BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Pauses between tries to record while the store fails; the last repeats."""


class OutcomeRecorder:
    """One thread that records finished runs; ``on_recorded`` hears of each one written.
    ``may_hold(by)``: may a write due ``by`` wait a moment for due runs to start."""

    def __init__(
        self,
        *,
        envelope: RunEnvelope,
        on_recorded: Callable[[Finished], None],
        may_hold: Callable[[datetime], bool] | None = None,
    ) -> None:
        self._envelope = envelope
        self._may_hold = may_hold
        self._on_recorded = on_recorded
        self._queue: queue.SimpleQueue[Finished | None] = queue.SimpleQueue()
        self.put: Callable[[Finished], None] = self._queue.put  # no call of ours per run
        self._give_up_at: float | None = None
        self._retry = StoreRetry(
            what="recording finished runs",
            waits=_BACKOFF,
            # A row refused even alone is kept and tried again, like an outage.
            retry_on=lambda error: isinstance(error, Exception),
            give_up=lambda _tries: (
                self._give_up_at is not None and time.monotonic() >= self._give_up_at
            ),
        )
        self._written_at = 0.0
        """When the last write ended (monotonic): a recent one means runs finish steadily."""
        self._later: list[tuple[float, Finished]] = []
        """Runs whose row the database refused (a trigger, a constraint): tried again later."""
        self._thread = threading.Thread(target=self._loop, name="jobhost-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, within: float) -> None:
        self._give_up_at = time.monotonic() + within
        self._queue.put(None)
        self._thread.join(within + 5)
        if self._thread.is_alive():
            _log.error(
                "stopping while finished runs are still being recorded after %gs; "
                "another replica will record what is left abandoned",
                within + 5,
            )

    def _loop(self) -> None:
        pending: list[Finished] = []
        stopping = False
        while True:
            pending += self._due_later()
            if not pending and not stopping:
                try:
                    first = self._queue.get(timeout=_LATER_SECONDS if self._later else None)
                except queue.Empty:
                    continue
                if first is None:
                    stopping = True
                else:
                    pending.append(first)
            # What was handed over with or after the stop is written too: a worker may hand
            # its run over while the host is stopping; only a store that stays away loses one.
            stopping |= self._gather(pending, wait=not stopping)
            if not pending:
                if stopping:
                    return
                continue
            pending = self._write_until_done(pending)
            self._written_at = time.monotonic()
            if stopping and pending:
                self._drop([*pending, *self._rest()])
                return

    def _gather(self, pending: list[Finished], *, wait: bool) -> bool:
        """Add what else is queued to ``pending``; True when the queue says stop. Busy (the last
        write was moments ago), it waits a few milliseconds for more runs: one transaction for
        a dozen costs little more than for three. An idle or stopping host writes at once."""
        stop = False
        busy = wait and time.monotonic() - self._written_at < _BUSY_SECONDS
        may_hold = self._may_hold if wait else None
        hold_until = time.monotonic() + HOLD_SECONDS
        by = _earliest(pending) if may_hold is not None else None
        while len(pending) < _BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                if (
                    may_hold is not None
                    and by is not None
                    and not stop
                    and time.monotonic() < hold_until
                    and may_hold(by)
                ):
                    time.sleep(_HOLD_STEP)
                    continue
                if not busy:
                    break
                busy = False
                time.sleep(_GATHER_SECONDS)
                continue
            if item is None:
                stop, busy = True, False
            else:
                pending.append(item)
                if by is not None:
                    record_by = item.claim.record_by
                    by = None if record_by is None else min(by, record_by)
        return stop

    def _rest(self) -> list[Finished]:
        rest: list[Finished] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return rest
            if item is not None:
                rest.append(item)

    def _write_until_done(self, batch: list[Finished]) -> list[Finished]:
        isolate = False

        def write() -> None:
            nonlocal isolate
            try:
                self._write(batch, isolate=isolate)
            except Exception as error:
                if isolate or is_store_down(error):
                    raise
                # Refused as a whole: again at once, each row alone, so one bad row costs only
                # itself.
                isolate = True
                self._write(batch, isolate=True)

        try:
            self._retry.call(write, what=f"recording {len(batch)} finished run(s)")
        except Exception:  # given up: the caller keeps what is left
            return batch
        return []

    def _write(self, batch: list[Finished], *, isolate: bool) -> None:
        for done in self._envelope.record(batch, isolate=isolate):
            finished = done.finished
            if done.verdict == "running":
                # Still ours, but the database refused its row: keep it, leased, and try again.
                _log.error(
                    "job %s run %s finished %s, but the store refused to record it; "
                    "trying again in %ds",
                    finished.claim.job_name,
                    finished.claim.run_id,
                    finished.outcome.outcome,
                    _LATER_SECONDS,
                )
                self._later.append((time.monotonic() + _LATER_SECONDS, finished))
                continue
            self._on_recorded(finished)
            self._envelope.settle(done)

    def _due_later(self) -> list[Finished]:
        now = time.monotonic()
        due = [f for at, f in self._later if at <= now or self._give_up_at is not None]
        self._later = [(at, f) for at, f in self._later if at > now and self._give_up_at is None]
        return due

    def _drop(self, batch: list[Finished]) -> None:
        for finished in batch:
            _log.error(
                "job %s run %s finished %s but the store could not record it before shutdown; "
                "another replica will record it abandoned",
                finished.claim.job_name,
                finished.claim.run_id,
                finished.outcome.outcome,
            )
            self._on_recorded(finished)


def _earliest(pending: list[Finished]) -> datetime | None:
    """When the first of ``pending`` must be recorded; None when one may not wait at all."""
    earliest: datetime | None = None
    for finished in pending:
        by = finished.claim.record_by
        if by is None:
            return None
        earliest = by if earliest is None else min(earliest, by)
    return earliest
