"""A running host: start-up, the firing loop, heartbeats, and a clean shutdown.

The loop claims what is due, hands each claim to the worker slots, then sleeps until the store
next needs it (at most the poll interval), woken when a run is recorded or a command signals.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from importlib.metadata import version as package_version
from types import FrameType
from typing import TYPE_CHECKING

from jobhost_contracts import Cancellation

from jobhost.catalog import Catalog
from jobhost.catalog.validation import UsesStore
from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings, redact_text
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.lifecycle import Finished, retrying_abandoned
from jobhost.envelope.reporting import Telemetry, configure_telemetry
from jobhost.envelope.runlog import RunLogWriter
from jobhost.errors import SchemaTooNewError
from jobhost.firing.slots import HostStatus, OutcomeRecorder, WorkerSlots
from jobhost.firing.tick import Duty, Maintenance, Ticker
from jobhost.records import RUNNING, RunRecord, describe_schedule
from jobhost.rules import FiringRules
from jobhost.runtime.reload import RuntimeReloader
from jobhost.store import Store, StoreError, check_not_newer
from jobhost.store.engine import (
    DEADLINE_MARGIN,
    DEFAULT_STATEMENT_TIMEOUT,
    StoreRetry,
    is_store_down,
)
from jobhost.store.ledger import default_host_id

if TYPE_CHECKING:
    from jobhost.firing.oneshot import OneShotWork

__all__ = ["Host", "HostStatus"]

_log = logging.getLogger("jobhost.host")
_MIN_SLEEP = 0.001
_STORE_DOWN_BACKOFF = 2.0
_BEAT_RETRY = 1.0
_STILL_DOWN_SECONDS = 60.0
_EXIT_MARGIN = 5.0
"""Seconds past ``shutdown_grace`` a stopping host gets before it exits anyway."""
_COALESCE = 0.002
_LATE_BIAS = 0.0005
"""Seconds the loop's wake aims after an occurrence: the claim reads the clock a little after
the turn notes its start, and a wake before the occurrence costs a turn that claims nothing."""
_MIN_STALL = 10.0
_HOLD_MARGIN = timedelta(seconds=0.25)
"""How long before a job's row is looked at again its held record is written at the latest:
the claim's lead (at most 50 ms) and two batches' writes, with room to spare."""


class Host:
    """One ``jobhost run`` process; with ``one_shot``, a command's own work in its process
    (see :mod:`jobhost.firing.oneshot`): no host row, no schedule fired, only that work."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        *,
        clock: Clock | None = None,
        host_id: str | None = None,
        telemetry: Telemetry | None = None,
        one_shot: OneShotWork | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.clock = clock or SystemClock(settings.clock_offset)
        self.store = store = store.with_clock(self.clock)
        self.host_id = host_id or settings.host_id or default_host_id()
        # Stalled, then hung: a turn past two store deadlines and three heartbeats waits on
        # something no deadline ends.
        stall = max(3 * settings.heartbeat_interval.total_seconds(), _MIN_STALL)
        statement = settings.store_statement_timeout.total_seconds() or DEFAULT_STATEMENT_TIMEOUT
        self.status = HostStatus(
            catalog_ok=catalog.ok,
            stuck_limit=max(1, (settings.worker_pool_size + 1) // 2),
            stall_after=stall,
            hung_after=2 * (statement + DEADLINE_MARGIN) + stall,
        )
        self.telemetry = telemetry or configure_telemetry()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._signals = 0
        self.exit_code = 0
        """0, or :class:`SchemaTooNewError`'s code once a newer release upgraded the store."""
        self._abandon_after = 0.0
        self._last_claims = 0
        self._down_since = self._down_said = 0.0
        """When (monotonic) the store went away, and when that was last said."""
        for spec in catalog.jobs.values():
            if isinstance(spec.executor, UsesStore):
                spec.executor.use_store(store)
        self._ticker = Ticker(
            self.store,
            catalog.jobs,
            host_id=self.host_id,
            lease_duration=settings.lease_duration,
            telemetry=self.telemetry,
            runtime=catalog.runtime,
            concurrency_limits=settings.concurrency_limits,
            announced=True,  # by _signalled and _recorded
        )
        self._runtime = RuntimeReloader(settings, catalog, store, self._ticker.update_jobs)
        self._run_logs = RunLogWriter(
            store,
            max_lines=settings.run_log_lines,
            max_bytes=settings.run_log_bytes,
            level=settings.log_level,
        )
        self._envelope = RunEnvelope(
            self.store,
            run_logs=self._run_logs,
            host_id=self.host_id,
            grace=settings.shutdown_grace,
            telemetry=self.telemetry,
            sinks=catalog.audit_sinks,
            sink_timeout=settings.audit_sink_timeout,
            # Every turn reads the store's clock; outcomes need no reading of their own.
            store_time=self._ticker.store_time,
        )
        self._recorder = OutcomeRecorder(
            envelope=self._envelope,
            on_recorded=self._recorded,
            may_hold=self._may_hold,
        )
        self.slots = WorkerSlots(
            settings.worker_pool_size,
            execute=self._envelope.execute,
            record=self._recorder.put,
            wake=self._wake.set,
            stopping=self._stopping.is_set,
            status=self.status,
            lease_duration=settings.lease_duration,
            store=self.store,
            host_id=self.host_id,
        )
        self._cancel_asked = threading.Event()
        """A command signalled: an operator may have asked to cancel a run this host holds."""
        self._watcher = store.signal_watcher(self._signalled)
        self._heartbeat = threading.Thread(target=self._beat, name="jobhost-heartbeat", daemon=True)
        self._one_shot = one_shot
        self._turn_lock = threading.Lock()
        """Held by the loop for each turn, and by a duty that changes what the loop fires by."""
        duties: list[Duty] = []
        if one_shot is None:  # a one-shot host claims only its own work
            duties = [
                Duty("looking for dead runs", timedelta(seconds=10), self._look_for_dead_runs),
                Duty("looking for runtime job changes", timedelta(seconds=1), self._look_again),
            ]
        self._maintenance = Maintenance(
            duties, now=self._ticker.store_time, on_failure=self._failed
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._one_shot is None:
            self._register_and_sync()
            self.status.synced = True
        self.status.store_ok = True
        self._recorder.start()
        self._watcher.start()
        self._heartbeat.start()
        self._maintenance.start()
        _log.info(
            "host %s started: catalog %s, %d jobs, pool of %d, poll every %ss",
            self.host_id,
            self._ticker.catalog_version,
            len(self.catalog.jobs),
            self.settings.worker_pool_size,
            self.settings.poll_interval.total_seconds(),
        )

    def _register_and_sync(self) -> None:
        """Register, write the catalog's schedules and say what changed: only what the host needs
        to fire, before ``/readyz`` answers 200."""
        rules = FiringRules(self.catalog.jobs, self.settings.lease_duration)
        self.store.start_host(
            host_id=self.host_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            version=package_version("jobhost"),
            clock=self.clock,
            heartbeat_seconds=max(int(self.settings.heartbeat_interval.total_seconds()), 1),
            retries_for=retrying_abandoned(self.telemetry, rules, why="restarted"),
        )
        self._runtime.start()
        plan = self._ticker.sync(self.store.now())
        for added in plan.added:
            _log.info("plan: add %s (%s)", added.job_name, describe_schedule(added))
        for change in plan.changed:
            _log.info("plan: change %s: %s -> %s", change.job_name, change.before, change.after)
        for name in plan.orphaned:
            _log.warning("plan: %s is no longer declared; kept in the store as orphaned", name)
        for name in plan.repaired:
            _log.warning(
                "job %s: stored next occurrence was not one its trigger produces; repaired", name
            )

    def run_forever(self, install_signals: bool = True) -> int:
        if install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.start()
        # What start-up made lives as long as the host: out of the collector's reach, a full
        # collection walks only what firing made since (not tens of milliseconds of pause).
        gc.freeze()
        self.loop()
        self.shutdown()
        return self.exit_code

    def loop(self) -> None:
        while not self._stopping.is_set():
            self.status.turn_started = time.monotonic()  # what the probes' watchdog reads
            with self._turn_lock:
                sleep = self.turn()
            self.status.turn_started = None
            self._maintenance.turned()
            woken = self._wake.wait(sleep)
            if woken and self._last_claims:
                # Under load, let a few more runs finish before the next claim: one claim
                # transaction for several free slots instead of one for each. A wake for a
                # due occurrence (the timer) goes straight to its claim.
                time.sleep(_COALESCE)
            self._wake.clear()

    def turn(self) -> float:
        """One tick; how long to sleep before the next."""
        poll = self.settings.poll_interval.total_seconds()
        if self._one_shot is not None:
            return self._one_shot_turn(poll)
        self._last_claims = 0
        try:
            # A signalled change is read before the claim, which may find its jobs due.
            self._runtime.reload_if_changed(signalled_only=True)
            self._apply_cancels(self.slots.held())
            self._ticker.may_abandon = self._may_abandon()
            free, ahead, manual_slots = self.slots.free()
            slots = free + ahead
            claimed_from = time.monotonic()
            # A host behind (room ahead) claims only what is due; one that keeps up claims
            # the next moments' occurrences too, and its workers start them on time.
            result = self._ticker.tick(
                None, slots, manual_slots, early=not ahead, backfill_slots=free
            )
            assert result.now is not None
            now = result.now
        except Exception as error:
            return self._turn_failed(error)
        if not self.status.store_ok:
            _log.info("store reachable again")
        self.status.store_ok = True
        self.status.last_tick = time.monotonic()
        self.status.ticks += 1
        self.status.lag = result.lag
        self.telemetry.schedule_lag_seconds = result.lag
        read_at = claimed_from if result.read_at is None else result.read_at
        for claim, spec in result.claims:
            # An occurrence claimed early starts at its instant, on the clock ``now`` was read
            # from: never before it, even on a host whose own clock is wrong.
            ahead_by = (claim.started_at - now).total_seconds()
            self.slots.submit(claim, spec, start_at=read_at + ahead_by if ahead_by > 0 else None)
        self._last_claims = len(result.claims)
        # What ended during the turn woke nobody: look at it now.
        if self.slots.turned(result.saturated, result.waiting):
            return _MIN_SLEEP
        if result.saturated or result.next_wake is None:
            return poll  # a run that finishes frees a slot and wakes the loop
        # The sleep starts later than ``now`` was read by what the turn took since, which
        # would otherwise make every next fire late by it; counted from before the claim, it
        # would wake the loop early by what the turn did before reading, and a turn that
        # claims nothing would come first.
        spent = time.monotonic() - read_at - _LATE_BIAS
        return min(max((result.next_wake - now).total_seconds() - spent, _MIN_SLEEP), poll)

    def _one_shot_turn(self, poll: float) -> float:
        assert self._one_shot is not None
        try:
            asked = self._apply_cancels(self.slots.held())
            sleep = self._one_shot.turn(self.slots, asked)
        except Exception as error:
            return self._turn_failed(error)
        if sleep is None:
            self.request_stop()
            return 0.0
        return min(sleep, poll)

    def _turn_failed(self, error: Exception) -> float:
        self._failed("tick", error)
        return min(self.settings.poll_interval.total_seconds(), _STORE_DOWN_BACKOFF)

    def request_stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def shutdown(self) -> None:
        self._stopping.set()
        self._watcher.stop()
        self._maintenance.stop()
        self.slots.release_queued()
        grace = self.settings.shutdown_grace.total_seconds()
        self.slots.cancel_all(grace)
        self._recorder.stop(within=max(min(grace, 10.0), 1.0))
        self._run_logs.close()
        if not self._envelope.flush_reports(min(grace, 5.0)):
            _log.warning("stopping with audit records still queued for a slow sink")
        try:
            self.store.beat(self.host_id, self.clock, stopped=True)
        except StoreError as error:
            _log.warning("could not mark host stopped: %s", redact_text(str(error)))
        self.telemetry.shutdown(min(5.0, grace))
        _log.info("host %s stopped", self.host_id)

    def _signalled(self) -> None:
        self._runtime.signalled()
        self._ticker.look_everywhere()
        self._cancel_asked.set()
        self._wake.set()

    def _apply_cancels(self, held: Mapping[str, Cancellation]) -> dict[str, str]:
        """Cancel the held runs an operator asked to cancel (on a signal only: no poll); say
        those, each with its reason."""
        if not self._cancel_asked.is_set():
            return {}
        live = {run_id: c for run_id, c in held.items() if not c.cancelled}
        if not live:
            self._cancel_asked.clear()
            return {}
        pages = self.store.run_pages(list(live))
        # Cleared only once read: a turn that failed to read tries again on the next.
        self._cancel_asked.clear()
        asked = {
            run_id: _cancel_reason(page.run)
            for run_id, page in pages.items()
            if page.run.cancel_requested_at is not None and page.run.outcome == RUNNING
        }
        for run_id, reason in asked.items():
            _log.info("run %s: cancel asked %s; cancelling it", run_id, reason)
            live[run_id].cancel(reason)
        return asked

    def _look_for_dead_runs(self, now: datetime) -> None:
        """Now and then in any case: a corrupt or implausible lease never comes first in the
        order of expiry, so the pass a turn makes for an expired lease may miss it."""
        if self._may_abandon() and self._ticker.abandon(now):
            self._wake.set()

    def _look_again(self, _now: datetime) -> None:
        """For a runtime job change whose signal was lost; under the turn's lock, as the reload
        swaps the jobs the loop fires by."""
        with self._turn_lock:
            swapped = self._runtime.reload_if_changed()
        if swapped:
            self._wake.set()

    def _may_abandon(self) -> bool:
        return time.monotonic() >= self._abandon_after

    def _may_hold(self, by: datetime) -> bool:
        """The last turn left due runs for want of a worker, and no claim reads the rows of
        records due ``by`` before then."""
        return self.slots.behind() and self._ticker.store_time() < by - _HOLD_MARGIN

    def _recorded(self, finished: Finished) -> None:
        claim = finished.claim
        outcome = finished.outcome.outcome
        if outcome != "succeeded":
            self._ticker.look_everywhere()  # its retry, if its policy asks for one
        wake = self.slots.recorded(claim, outcome)
        wake |= self._ticker.run_ended(claim)  # room for a backfill's next occurrence
        _log.log(
            logging.DEBUG if outcome == "succeeded" else logging.INFO,
            "job %s: run %s %s",
            claim.job_name,
            claim.run_id,
            outcome,
        )
        if wake or self._one_shot is not None:  # a one-shot host may be done
            self._wake.set()

    def _failed(self, what: str, error: Exception) -> None:
        """Say why ``what`` failed: the store's going away once (then once a minute), anything
        else each time."""
        if is_store_down(error):
            now = time.monotonic()
            why = redact_text(str(error).splitlines()[0] if str(error) else "")
            if self.status.store_ok:
                _log.warning("store unreachable: %s; retrying", why)
                self._down_since = self._down_said = now
            elif now - self._down_said >= _STILL_DOWN_SECONDS:
                self._down_said = now
                _log.warning(
                    "store still unreachable after %ds: %s; retrying",
                    now - self._down_since,
                    why,
                )
            self._store_lost()
        elif self._schema_moved_on():
            return
        else:
            # A bug must not stop the host: say so loudly and try again.
            _log.error(
                "%s failed: %s: %s",
                what,
                type(error).__name__,
                redact_text(str(error)),
                exc_info=error,
            )

    def _schema_moved_on(self) -> bool:
        """A newer release upgraded the store: say so and stop, for the orchestrator to start
        the newer release in its place."""
        try:
            check_not_newer(self.store.current_revision())
        except SchemaTooNewError as error:
            if not self._stopping.is_set():
                _log.error("%s; this host stops", error)
            self.exit_code = error.exit_code
            self.request_stop()
            return True
        except Exception:
            return False  # the failure is said by the caller, as any other
        return False

    def _store_lost(self) -> None:
        # Live hosts get two heartbeats to renew their leases before this host abandons runs.
        self.status.store_ok = False
        # The next turn asks the store, even between fires: its answer says it is back.
        self._ticker.look_everywhere()
        beat = self.settings.heartbeat_interval.total_seconds()
        self._abandon_after = time.monotonic() + 2 * beat + _STORE_DOWN_BACKOFF

    def _beat(self) -> None:
        """Renew the host and its leases, and say its stuck runs, every ``heartbeat_interval``; a
        failed beat is retried once soon after, and tells the host the store is away."""
        interval = self.settings.heartbeat_interval.total_seconds()
        retry = StoreRetry(
            what="heartbeat",
            waits=(min(interval, _BEAT_RETRY),),
            # The heartbeat thread must outlive any one failure.
            retry_on=lambda error: isinstance(error, Exception),
            stopping=self._stopping,
            on_failure=lambda error: self._store_lost(),
        )
        while not self._stopping.wait(interval):
            # Raises only when stopping while the store is away: nothing is left to renew.
            with contextlib.suppress(Exception):
                retry.call(self._beat_once)

    def _beat_once(self) -> None:
        running = self.slots.runs()
        by_lease: dict[timedelta, list[str]] = {}
        stuck: dict[str, str] = {}
        for item in running:
            by_lease.setdefault(item.lease, []).append(item.claim.run_id)
            if item.stuck is not None:
                stuck[item.claim.run_id] = item.stuck
        beat = self.store.beat(
            self.host_id,
            self.clock,
            leases=by_lease,
            schedule_lag=self.status.lag,
            with_groups=bool(self.settings.concurrency_limits),
            stuck=stuck,
        )
        if beat.groups is not None:
            self.telemetry.group_running = {g.name: g.running for g in beat.groups}
        for item in running:
            # A run that finished meanwhile was just recorded: its lease is gone, nothing lost.
            if item.claim.run_id in beat.lost and not item.finished:
                _log.warning(
                    "job %s run %s lost its lease; cancelling it",
                    item.claim.job_name,
                    item.claim.run_id,
                )
                item.cancellation.cancel("lease lost")
        # SQLite: the signal's net, should a writer have died between its commit and its ring.
        self._watcher.look()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            _log.warning("second signal: exiting at once")
            os._exit(1)
        _log.info("signal %s: stopping (again to exit at once)", signal.Signals(signum).name)
        self.request_stop()
        # Whatever a thread waits on, the process is gone soon after the grace.
        limit = self.settings.shutdown_grace.total_seconds() + _EXIT_MARGIN
        escape = threading.Timer(limit, _exit_late, args=(limit,))
        escape.daemon = True
        escape.start()


def _cancel_reason(run: RunRecord) -> str:
    """What the executor of a run an operator asked to cancel is told: who asked, and why."""
    by, why = run.cancel_requested_by, run.cancel_reason
    return f"by {by}: {why}" if why else f"by {by}"


def _exit_late(limit: float) -> None:
    _log.warning("shutdown did not finish within %gs of the signal: exiting now", limit)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(1)
