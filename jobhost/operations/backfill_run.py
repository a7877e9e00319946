"""A recorded backfill seen to its end: followed while hosts run it, or run in this process.

With live hosts the command only reads: the backfill's items counted by state, a line each time
the counts change. With no live host (or once every host is gone) it runs the backfill itself,
as ``jobhost trigger`` runs a manual request: the same claim (:func:`claim_backfills`, for this
backfill alone, with its retries), the same envelope and ledger, leases renewed while the runs
go on. Ctrl-C detaches: the backfill stays in the store and any host continues it; runs this
process started finish first (Ctrl-C again abandons them to their lease).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

from jobhost_contracts import Cancellation

from jobhost.catalog import Catalog, JobSpec
from jobhost.catalog.executors import UsesStore
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.execution import Outcome
from jobhost.envelope.runlog import RunLogWriter
from jobhost.envelope.telemetry import Telemetry, configure_telemetry
from jobhost.operations.backfill_view import progress_line
from jobhost.operations.interrupt_hold import InterruptHold
from jobhost.rules.claiming import FiringRules
from jobhost.rules.desired import desired_schedules
from jobhost.store import Clock, Engine, SystemClock, backfill_runs
from jobhost.store.backfill_runs import claim_backfill, settled_backfill
from jobhost.store.backfills import BackfillRecord, get_backfill
from jobhost.store.calls import read, read_at
from jobhost.store.claims import Claim
from jobhost.store.hosts import default_host_id, live_hosts
from jobhost.store.run_actions import renew_watching_cancel
from jobhost.store.signals import ChangeSignal

__all__ = ["BackfillFollower", "Followed", "ensure_scheduled"]

_POLL_SECONDS = 0.2
_FOLLOW_SECONDS = 1.0
_HOST_CHECK_SECONDS = 2.0

Progress = Callable[[str], None]


def ensure_scheduled(engine: Engine, spec: JobSpec, clock: Clock) -> None:
    """Give the job a schedule row if no host has yet, as a starting host would: a backfill's
    claim locks it."""
    backfill_runs.ensure_scheduled(engine, spec.name, desired_schedules({spec.name: spec}), clock)


@dataclass(frozen=True)
class Followed:
    """Where following a backfill ended: ``record`` as the store has it; ``detached`` when
    the operator stopped following before it finished."""

    record: BackfillRecord
    detached: bool = False


class BackfillFollower:
    """Follows (or runs) backfills of ``catalog``'s jobs; ``progress`` gets one line a step."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        engine: Engine,
        *,
        progress: Progress,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings
        self._catalog = catalog
        self._engine = engine
        self._progress = progress
        self._clock = clock or SystemClock(settings.clock_offset)
        self._host_id = f"cli-{default_host_id()}"
        self._said = ""

    def hosts_alive(self) -> bool:
        return bool(read_at(self._engine, self._clock, live_hosts)[1])

    def ensure_scheduled(self, spec: JobSpec) -> None:
        """Give the job a schedule row if no host has yet, as a starting host would."""
        ensure_scheduled(self._engine, spec, self._clock)

    def follow(self, backfill_id: str, spec: JobSpec) -> Followed:
        """Watch the hosts run the backfill until it is finished; run it here if they go."""
        next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
        try:
            with ChangeSignal(self._engine) as signal:
                while True:
                    record = self._read(backfill_id)
                    self._say(record)
                    if record.finished:
                        return Followed(record)
                    if time.monotonic() >= next_host_check:
                        next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
                        if not self.hosts_alive():
                            self._progress("no live host any more: running the rest here")
                            return self.run_here(backfill_id, spec)
                    signal.wait(_FOLLOW_SECONDS)
        except KeyboardInterrupt:
            return self._detached(backfill_id)

    def run_here(self, backfill_id: str, spec: JobSpec) -> Followed:
        """Run the backfill in this process until it is finished (or Ctrl-C detaches)."""
        telemetry = configure_telemetry()
        telemetry.install_globally()
        run_logs = RunLogWriter(
            self._engine,
            max_lines=self._settings.run_log_lines,
            max_bytes=self._settings.run_log_bytes,
            level=self._settings.log_level,
        )
        try:
            return self._run(backfill_id, spec, telemetry, run_logs)
        finally:
            run_logs.close()
            telemetry.shutdown()

    # -- internals ---------------------------------------------------------------------------

    def _run(
        self, backfill_id: str, spec: JobSpec, telemetry: Telemetry, run_logs: RunLogWriter
    ) -> Followed:
        if isinstance(spec.executor, UsesStore):
            spec.executor.use_store(self._engine)  # as a host does
        envelope = RunEnvelope(
            self._engine,
            run_logs=run_logs,
            host_id=self._host_id,
            clock=self._clock,
            grace=self._settings.shutdown_grace,
            telemetry=telemetry,
            sinks=self._catalog.audit_sinks,
            sink_timeout=self._settings.audit_sink_timeout,
        )
        rules = FiringRules({spec.name: spec}, self._settings.lease_duration)
        record = self._read(backfill_id)
        width = max(record.concurrency, 1)
        running: dict[Future[Outcome], tuple[Claim, Cancellation]] = {}
        beat = self._settings.heartbeat_interval.total_seconds()
        next_beat = time.monotonic() + beat
        claiming = True
        try:
            while True:
                try:
                    # Ctrl-C is held across each store call (cut off mid-statement, a
                    # connection would go back to the pool broken for the reads after it), and
                    # across a claim until its runs have started (none is left claimed, unrun).
                    if claiming:
                        with InterruptHold():
                            for claim in self._claim(backfill_id, rules, width - len(running)):
                                self._progress(
                                    f"running {claim.occurrence:%Y-%m-%dT%H:%M:%SZ} here "
                                    f"(run {claim.run_id}, attempt {claim.attempt})"
                                )
                                cancellation = Cancellation()
                                future = _in_daemon_thread(envelope, claim, spec, cancellation)
                                running[future] = (claim, cancellation)
                    if running:
                        done, _ = wait(running, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                        for future in done:
                            running.pop(future)
                        if running and time.monotonic() >= next_beat:
                            next_beat = time.monotonic() + beat
                            with InterruptHold():
                                self._renew(rules, spec, list(running.values()))
                    with InterruptHold():
                        record = self._read(backfill_id)
                    self._say(record)
                    if not running and (record.finished or not claiming):
                        return Followed(record, detached=not record.finished)
                    if not running:
                        time.sleep(_POLL_SECONDS)
                except KeyboardInterrupt:
                    if not claiming:
                        raise
                    claiming = False
                    self._progress(
                        "interrupted: claiming no more; the runs in flight finish "
                        "(Ctrl-C again to leave them to their lease)"
                    )
        except KeyboardInterrupt:
            return self._detached(backfill_id)

    def _claim(self, backfill_id: str, rules: FiringRules, slots: int) -> list[Claim]:
        return claim_backfill(
            self._engine,
            backfill_id,
            host_id=self._host_id,
            rules=rules,
            slots=slots,
            clock=self._clock,
        )

    def _renew(
        self, rules: FiringRules, spec: JobSpec, held: list[tuple[Claim, Cancellation]]
    ) -> None:
        """Renew the runs' leases, and cancel those an operator asked to (``jobhost cancel``
        from another process: this one has no signal watcher)."""
        asked = renew_watching_cancel(
            self._engine,
            self._host_id,
            [claim.run_id for claim, _ in held],
            rules.lease(spec.name),
            self._clock,
        )
        for claim, cancellation in held:
            reason = asked.get(claim.run_id)
            if reason is not None and not cancellation.cancelled:
                self._progress(f"cancel asked {reason}: cancelling run {claim.run_id}")
                cancellation.cancel(reason)

    def _read(self, backfill_id: str) -> BackfillRecord:
        record = settled_backfill(self._engine, backfill_id, self._clock)
        assert record is not None, f"backfill {backfill_id} disappeared"
        return record

    def _say(self, record: BackfillRecord) -> None:
        line = progress_line(record)
        if line != self._said:
            self._said = line
            self._progress(line)

    def _detached(self, backfill_id: str) -> Followed:
        self._progress(
            f"detached: backfill {backfill_id} goes on in the store (jobhost backfill --show "
            f"{backfill_id}; --cancel {backfill_id} stops it)"
        )
        record = read(self._engine, get_backfill, backfill_id)
        assert record is not None
        return Followed(record, detached=True)


def _in_daemon_thread(
    envelope: RunEnvelope, claim: Claim, spec: JobSpec, cancellation: Cancellation
) -> Future[Outcome]:
    """Run ``claim`` on a thread of its own, at most ``width`` at once as the loop claims them.

    A daemon, not a pool's worker: once a second Ctrl-C leaves the runs in flight to their
    lease, the process exits at once instead of waiting at exit for code that may never end.
    """
    future: Future[Outcome] = Future()

    def _target() -> None:
        try:
            future.set_result(envelope.run(claim, spec, cancellation))
        except BaseException as error:  # handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=_target, name="jobhost-backfill", daemon=True).start()
    return future
