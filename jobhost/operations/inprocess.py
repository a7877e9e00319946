"""One claimed run, executed in a command's own process as a host would run it.

``jobhost trigger`` and ``jobhost retry`` run here when no host is alive: the same envelope,
ledger row and span; the lease renewed every heartbeat; an operator's cancel request (``jobhost
cancel`` from another process) looked for at each renewal, since a command has no signal
watcher; the command's own ``--timeout`` and Ctrl-C cancel the run too. Ctrl-C is held from
the claim until the run is supervised, so that it cancels a claimed run wherever it lands.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from jobhost_contracts import Cancellation

from jobhost.catalog import Catalog, JobSpec
from jobhost.catalog.executors import UsesStore
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.runlog import RunLogWriter
from jobhost.envelope.telemetry import Telemetry, configure_telemetry
from jobhost.operations.interrupt_hold import InterruptHold
from jobhost.rules.claiming import FiringRules
from jobhost.rules.policy import lease_for
from jobhost.store import Clock, Engine, RunRecord
from jobhost.store.calls import read
from jobhost.store.claims import Claim, ClaimBatch
from jobhost.store.reports import get_run
from jobhost.store.run_actions import renew_watching_cancel

__all__ = ["POLL_SECONDS", "ClaimOne", "RunsHere", "run_claim_here"]

POLL_SECONDS = 0.2


class ClaimOne(Protocol):
    """A host's claim of one pending run, by its id (``claim_run``)."""

    def __call__(
        self, engine: Engine, key: str, /, *, host_id: str, rules: FiringRules, clock: Clock
    ) -> ClaimBatch: ...


@dataclass(frozen=True)
class RunsHere:
    """What a command needs to claim one run and execute it in its own process."""

    settings: Settings
    catalog: Catalog
    engine: Engine
    host_id: str
    clock: Clock
    progress: Callable[[str], None]

    def claim_and_run(
        self, claim: ClaimOne, key: str, spec: JobSpec, deadline: float | None
    ) -> tuple[RunRecord, bool] | None:
        """Claim ``key`` as a host would and, when the claim took the run, execute it here with
        telemetry of its own, flushed before this returns; the run row and whether
        ``deadline`` cancelled it, or None when the claim took nothing (the run is refused,
        busy, or a host took it first)."""
        telemetry = configure_telemetry()
        telemetry.install_globally()
        try:
            rules = FiringRules(self.catalog.jobs, self.settings.lease_duration)
            with InterruptHold() as interrupts:
                batch = claim(self.engine, key, host_id=self.host_id, rules=rules, clock=self.clock)
                if not batch.claims:
                    return None
                (claimed,) = batch.claims
                self.progress(f"running here as host {self.host_id} (run {claimed.run_id})")
                return run_claim_here(
                    self.settings,
                    self.catalog,
                    self.engine,
                    claim=claimed,
                    spec=spec,
                    host_id=self.host_id,
                    clock=self.clock,
                    telemetry=telemetry,
                    deadline=deadline,
                    progress=self.progress,
                    interrupts=interrupts,
                )
        finally:
            telemetry.shutdown()


def run_claim_here(
    settings: Settings,
    catalog: Catalog,
    engine: Engine,
    *,
    claim: Claim,
    spec: JobSpec,
    host_id: str,
    clock: Clock,
    telemetry: Telemetry,
    deadline: float | None,
    progress: Callable[[str], None],
    interrupts: InterruptHold,
) -> tuple[RunRecord, bool]:
    """Execute ``claim`` here to its recorded outcome; the run row, and whether ``deadline``
    (a ``time.monotonic()`` instant) cancelled it. A Ctrl-C that ``interrupts`` holds is
    delivered once the run is supervised, and cancels it."""
    if isinstance(spec.executor, UsesStore):
        spec.executor.use_store(engine)  # as a host does
    run_logs = RunLogWriter(
        engine,
        max_lines=settings.run_log_lines,
        max_bytes=settings.run_log_bytes,
        level=settings.log_level,
    )
    envelope = RunEnvelope(
        engine,
        run_logs=run_logs,
        host_id=host_id,
        clock=clock,
        grace=settings.shutdown_grace,
        telemetry=telemetry,
        sinks=catalog.audit_sinks,
        sink_timeout=settings.audit_sink_timeout,
    )
    try:
        timed_out = _supervise(
            settings,
            engine,
            envelope,
            claim=claim,
            spec=spec,
            host_id=host_id,
            clock=clock,
            deadline=deadline,
            progress=progress,
            interrupts=interrupts,
        )
    finally:
        run_logs.close()
    run = read(engine, get_run, claim.run_id)
    assert run is not None, f"run {claim.run_id} is in the ledger once recorded"
    return run, timed_out


def _supervise(
    settings: Settings,
    engine: Engine,
    envelope: RunEnvelope,
    *,
    claim: Claim,
    spec: JobSpec,
    host_id: str,
    clock: Clock,
    deadline: float | None,
    progress: Callable[[str], None],
    interrupts: InterruptHold,
) -> bool:
    """Run the envelope in a thread, renewing the lease; True if the deadline cancelled it."""
    cancellation = Cancellation()
    # Wait on an event, not on Thread.join: a join interrupted by Ctrl-C can leave the
    # thread looking finished while it still runs (CPython before 3.13).
    finished = threading.Event()

    def _target() -> None:
        try:
            envelope.run(claim, spec, cancellation)
        finally:
            finished.set()

    # A daemon: a second Ctrl-C leaves the run to its lease and the process exits at once,
    # instead of waiting at exit for code that may ignore its cancellation.
    worker = threading.Thread(target=_target, name="jobhost-manual-run", daemon=True)
    worker.start()
    lease = lease_for(spec.declaration, settings.lease_duration)
    beat = settings.heartbeat_interval.total_seconds()
    next_beat = time.monotonic() + beat
    timed_out = False
    try:
        # Only from here is a Ctrl-C a cancel: the worker runs and the handler below is armed.
        interrupts.deliver()
        while not finished.wait(POLL_SECONDS):
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + beat
                # Held: cut off mid-statement, the connection would go back to the pool
                # broken, and the run's outcome could not be recorded through it.
                with InterruptHold():
                    asked = renew_watching_cancel(
                        engine, host_id, [claim.run_id], lease, clock
                    ).get(claim.run_id)
                if asked is not None and not cancellation.cancelled:
                    progress(f"cancel asked {asked}: cancelling the run")
                    cancellation.cancel(asked)
            if deadline is not None and time.monotonic() >= deadline and not timed_out:
                timed_out = True
                progress("timed out waiting: cancelling the run")
                cancellation.cancel("the operator's --timeout passed")
    except KeyboardInterrupt:
        progress("interrupted: cancelling the run (Ctrl-C again to abandon it)")
        cancellation.cancel("interrupted by the operator")
        finished.wait()
    except BaseException:
        # The command fails (a renewal the store refused, say), but the run's code is not cut
        # off mid-way by the process's exit: it ends first, and its outcome is recorded if the
        # store allows. Only a Ctrl-C abandons it.
        progress("waiting for the run to end before exiting (Ctrl-C to abandon it)")
        finished.wait()
        raise
    worker.join()
    return timed_out
