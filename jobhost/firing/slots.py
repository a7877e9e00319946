"""A host's worker slots: the runs it holds, the workers executing them, and what waits.

The firing loop hands each claimed run here; a worker executes it, hands its outcome to the
recorder and takes the next run queued, if any. The loop, the workers, the recorder's thread and
the heartbeat all read and change this bookkeeping, so it lives behind one lock, and every step
that reads a count and then changes it (a run ending and the next queued run taking its slot, a
stuck run's code ending and its slot coming free, shutdown giving up on what is left) is one
hold of that lock. The loop is woken (``wake``) only where a freed slot could let a claim succeed.

What the slots count is workers, not runs: a worker runs the executor on its own thread, so a
run holds its slot while its executor runs (a stuck one until its code ends), and stays held
(so its lease is renewed) until its outcome is in the ledger. Runs claimed beyond the free
workers wait in the claim-ahead queue (:mod:`jobhost.firing.ahead`) for a worker to finish.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Set
from datetime import timedelta
from typing import Protocol

from jobhost_contracts import Cancellation

from jobhost.catalog import JobSpec
from jobhost.clock import Clock
from jobhost.config import redact_text
from jobhost.envelope.envelope import Executed
from jobhost.envelope.execution import Outcome
from jobhost.envelope.supervision import SupervisedCancellation
from jobhost.envelope.threads import DaemonThreads
from jobhost.firing.ahead import AheadQueue
from jobhost.firing.recorder import Finished
from jobhost.firing.runs import HeldRun, mark_stuck
from jobhost.firing.status import HostStatus
from jobhost.records import Claim
from jobhost.rules.policy import lease_for
from jobhost.store import Store

__all__ = ["WorkerSlots"]

_log = logging.getLogger("jobhost.host")  # the host's lines, wherever they are written


class WorkerSlots:
    """The runs one host holds and the workers they take, behind one lock."""

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
        clock: Clock,
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
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, HeldRun] = {}
        """Every run this host holds: executing, stuck, or waiting for its outcome's record."""
        self._executing = 0
        """Runs whose executor holds a worker (stuck ones too): what the slots count."""
        self._ahead: AheadQueue[HeldRun] = AheadQueue(workers)
        """Runs claimed beyond the free workers, in ``_running`` too: the next worker free
        starts the oldest."""
        self._saturated = False
        """The last turn left due work for want of a slot: a freed slot wakes the loop."""
        self._waiting: set[str] = set()
        """Jobs whose due work waits for a run of theirs to be recorded: its record wakes the
        loop. Any other record or freed slot does not, as no claim could succeed sooner."""

    # -- the loop's turn ----------------------------------------------------------------------

    def free(self) -> tuple[int, int, int]:
        """Free workers, room in the claim-ahead queue, and the slot kept for manual
        requests."""
        if self._stopping():
            return 0, 0, 0
        with self._lock:
            running = self._executing
            # Only a host that is behind (its last claim left due work for want of room) claims
            # ahead: at a due instant every replica first takes what its workers can start.
            ahead = self._ahead.room() if self._saturated else 0
        pool = self._workers
        return max(pool - running, 0), ahead, 1 if running < pool + 1 else 0

    def submit(self, claim: Claim, spec: JobSpec, *, start_at: float | None = None) -> None:
        """Hold a claimed run and start it on a free worker, or queue it for the next one;
        a run claimed before its occurrence starts no sooner than ``start_at`` (monotonic)."""
        lease = lease_for(spec.declaration, self._lease_duration)
        item = HeldRun(claim, spec, SupervisedCancellation(), lease, start_at=start_at)
        if self._admit(item):
            self._start(item)

    def turned(self, saturated: bool, waiting: Set[str]) -> bool:
        """Note what the turn left waiting; true if something that would have woken the loop
        ended during the turn, so the loop should turn again at once."""
        with self._lock:
            self._saturated = saturated
            self._waiting |= waiting
            holding = {item.claim.job_name for item in self._running.values()}
            ended = saturated and self._executing < self._workers
            ended |= saturated and self._ahead.bound > 0 and self._ahead.low()
            ended |= any(name not in holding for name in waiting)
        return ended

    def behind(self) -> bool:
        """The last turn left due work for want of a worker."""
        with self._lock:
            return self._saturated

    def held(self) -> dict[str, Cancellation]:
        """The cancellation of each run whose executor still runs here."""
        with self._lock:
            return {
                run_id: item.cancellation
                for run_id, item in self._running.items()
                if not item.finished
            }

    # -- workers, the recorder, the heartbeat -------------------------------------------------

    def recorded(self, claim: Claim, outcome: str) -> bool:
        """A run's outcome is in the ledger: let the run go; true if that should wake the loop."""
        with self._lock:
            self._running.pop(claim.run_id, None)
            # A failed run may have left a retry; a waiting job may start now (a backfill's
            # next occurrence: the ticker says, see Ticker.run_ended).
            wake = outcome != "succeeded" or claim.job_name in self._waiting
            if claim.backfill_id is not None:
                self._waiting.discard(claim.job_name)
        return wake

    def runs(self) -> list[HeldRun]:
        """Every run held now: the heartbeat renews their leases."""
        with self._lock:
            return list(self._running.values())

    def idle(self) -> bool:
        """No run held: none executing, queued or waiting for its record."""
        with self._lock:
            return not self._running

    def timed(self, seconds: float) -> None:
        """A run took ``seconds``: the claim-ahead queue sizes its room by the recent pace."""
        with self._lock:
            self._ahead.timed(seconds)

    # -- shutdown -----------------------------------------------------------------------------

    def release_queued(self) -> None:
        """Give the runs still waiting in the claim-ahead queue back to the store, due at once
        for any host; should the store be away, their leases run out and the runs are recorded
        abandoned, as a dead host's are."""
        with self._lock:
            queued = self._ahead.drain()
            for item in queued:
                self._running.pop(item.claim.run_id, None)
        if not queued:
            return
        ids = [item.claim.run_id for item in queued]
        try:
            released = self._store.release_runs(self._host_id, ids, self._clock)
        except Exception as error:
            _log.warning(
                "could not give back %d runs claimed but not started (%s); they are recorded "
                "abandoned once their leases expire",
                len(ids),
                redact_text(str(error).splitlines()[0] if str(error) else type(error).__name__),
            )
            return
        _log.info("gave back %d runs claimed but not started: pending, due now", len(released))

    def cancel_all(self, grace: float) -> list[HeldRun]:
        """Cancel every run held and wait up to ``grace`` seconds for their executors (stuck ones
        too) to end; return the runs still held then, now counted finished, for shutdown to
        record cancelled. Idle workers end; a worker still held by its executor ends with it."""
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
        return leftovers

    # -- a run on a worker --------------------------------------------------------------------

    def _admit(self, item: HeldRun) -> bool:
        with self._lock:
            self._running[item.claim.run_id] = item
            # A person's run takes the slot kept for it; other runs wait for a free worker.
            start = self._executing < self._workers or item.claim.source == "manual"
            if start:
                self._executing += 1
            else:
                self._ahead.put(item)
        return start

    def _start(self, item: HeldRun) -> None:
        claim = item.claim
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

    def _work(self, first: HeldRun) -> None:
        """Execute a run, then whatever the claim-ahead queue holds while it holds any."""
        item: HeldRun | None = first
        while item is not None:
            item = self._execute(item)

    def _execute(self, item: HeldRun) -> HeldRun | None:
        """Execute one run and hand its outcome over; return the queued run to start next."""
        self._wait_for_instant(item)
        claim = item.claim
        current = threading.current_thread()
        current.name = f"job:{claim.job_name}"  # what a thread dump of a stuck host shows
        began = time.monotonic()
        try:
            executed = self._execute_run(
                claim,
                item.spec,
                item.cancellation,
                on_stuck=lambda verdict: self._stuck(item, verdict),
            )
        except Exception as error:
            _log.exception("job %s: run %s could not be executed", claim.job_name, claim.run_id)
            executed = Executed(
                Outcome("failed", error_type=type(error).__name__, error_message=str(error)),
                None,
            )
        current.name = "jobhost-run"
        following: HeldRun | None = None
        with self._lock:
            self._ahead.timed(time.monotonic() - began)
            was_stuck, item.stuck = item.stuck, False
            if was_stuck:
                self._status.stuck -= 1
            if item.finished:
                return None  # shutdown already recorded it cancelled
            item.finished = True
            self._executing -= 1
            # Handed over while the lock is held: a shutdown that sees the run finished stops
            # the recorder only after its outcome is queued, never before.
            self._record(Finished(claim, item.spec, executed))
            if not self._stopping():
                following = self._ahead.take()
            if following is not None:
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

    def _wait_for_instant(self, item: HeldRun) -> None:
        """A run claimed before its occurrence starts at it. Shutdown does not cut the wait
        short (at most :data:`~jobhost.firing.early.CAP`): the run then starts cancelled and
        is recorded as any run in flight at shutdown is."""
        wait = 0.0 if item.start_at is None else item.start_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _stuck(self, item: HeldRun, verdict: Outcome) -> None:
        """The supervisor declared the run stuck: its worker stays with it; say so in the
        ledger, off the supervisor's thread (a store write may wait)."""
        with self._lock:
            if item.finished:
                return  # it ended meanwhile, or shutdown gave up on it
            item.stuck = True
            self._status.stuck += 1
        threading.Thread(
            target=mark_stuck,
            args=(self._store, item, verdict, self._host_id),
            name="jobhost-stuck",
            daemon=True,
        ).start()


class _Execute(Protocol):
    def __call__(
        self,
        claim: Claim,
        spec: JobSpec,
        cancellation: Cancellation,
        *,
        on_stuck: Callable[[Outcome], None] | None = None,
    ) -> Executed: ...
