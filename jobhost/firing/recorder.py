"""Writing finished runs to the ledger: in batches, from one thread, and never dropping one.

Workers hand over a finished run and go back to the pool at once; the recorder writes every run
handed over since its last write in one transaction. While the store is away it keeps the
outcomes and tries again, however long that takes (the runs keep their leases meanwhile, as the
host renews them until they are recorded); only a host that is shutting down gives up, after
its grace period, and says so.

Starting due runs comes before recording finished ones, where waiting changes nothing: while
the host has due runs it has no worker for, the recorder holds its write (at most
:data:`HOLD_SECONDS`) so that the process spends its time claiming and starting them, then
records what finished meanwhile in one transaction. A record is held only until a moment before
a claim would next look at its job's row (:attr:`~jobhost.store.claims.Claim.record_by`: the
overlap rule reads the record there), and never for a run without that instant.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime

from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.recording import Finished, settle
from jobhost.store.retrying import StoreRetry, is_store_down

__all__ = ["HOLD_SECONDS", "Finished", "OutcomeRecorder"]

_log = logging.getLogger("jobhost.host")
_BATCH = 500
_LATER_SECONDS = 30
_BUSY_SECONDS = 0.05
_GATHER_SECONDS = 0.005
HOLD_SECONDS = 0.5
"""Longest a write waits while the host is behind on due runs."""
_HOLD_STEP = 0.01
_BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Pauses between tries to record while the store fails; the last repeats."""


class OutcomeRecorder:
    """One thread that records finished runs; ``on_recorded`` hears of each one written.

    ``may_hold(by)`` answers whether a write whose runs must be recorded by ``by`` (the
    earliest :attr:`~jobhost.store.claims.Claim.record_by` among them) may wait a moment for
    due runs to start (see the module); the default never waits.
    """

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

    def put(self, finished: Finished) -> None:
        self._queue.put(finished)

    def stop(self, within: float) -> None:
        """Write what is left, trying for at most ``within`` seconds while the store is away."""
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
        """Add what else is queued to ``pending``; True when the queue says stop.

        Busy (the last write was moments ago), it waits a few milliseconds for more runs to
        finish first: one transaction for a dozen runs costs little more than one for three.
        Behind on due runs, it waits for them to start, as long as its runs may wait (see the
        module). An idle host's run, or a stopping host's, is written at once."""
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
        """Whatever is still queued, without waiting."""
        rest: list[Finished] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return rest
            if item is not None:
                rest.append(item)

    def _write_until_done(self, batch: list[Finished]) -> list[Finished]:
        """Write ``batch``; on a store outage keep trying; return what could not be written."""
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
                    finished.executed.outcome.outcome,
                    _LATER_SECONDS,
                )
                self._later.append((time.monotonic() + _LATER_SECONDS, finished))
                continue
            self._on_recorded(finished)
            settle(self._envelope, done)

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
                finished.executed.outcome.outcome,
            )
            self._on_recorded(finished)


def _earliest(pending: list[Finished]) -> datetime | None:
    """The earliest instant by which one of ``pending`` must be recorded; None when one of them
    may not wait at all (or there are none)."""
    earliest: datetime | None = None
    for finished in pending:
        by = finished.claim.record_by
        if by is None:
            return None
        earliest = by if earliest is None else min(earliest, by)
    return earliest
