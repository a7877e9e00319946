"""A running host: start-up, the firing loop, heartbeats, and a clean shutdown.

The loop reads the clock once per tick (the database's clock on PostgreSQL), claims what is due,
hands each claim to a bounded pool, then sleeps until the earliest next occurrence, capped by
the poll interval, waking at once when a worker frees a slot or a command signals the hosts.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib.metadata import version as package_version
from types import FrameType

from jobhost_contracts import AuditSink, Cancellation
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings, redact_text
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.telemetry import Telemetry, configure_telemetry
from jobhost.firing.policy import lease_for
from jobhost.firing.tick import Ticker
from jobhost.store import Clock, SystemClock, database_now, ledger
from jobhost.store import hosts as host_rows
from jobhost.store.claims import Claim
from jobhost.store.signals import SignalWatcher

__all__ = ["Host", "HostStatus", "default_host_id"]

_log = logging.getLogger("jobhost.host")
_MIN_SLEEP = 0.001
_STORE_DOWN_BACKOFF = 2.0


@dataclass
class HostStatus:
    """What the HTTP probes read: is the loop turning, is the store reachable."""

    started: float = field(default_factory=time.monotonic)
    last_tick: float | None = None
    store_ok: bool = False
    catalog_ok: bool = True
    ticks: int = 0


@dataclass
class _Running:
    claim: Claim
    spec: JobSpec
    cancellation: Cancellation
    lease: timedelta


class Host:
    """One ``jobhost run`` process."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        engine: Engine,
        *,
        clock: Clock | None = None,
        host_id: str | None = None,
        telemetry: Telemetry | None = None,
        sinks: Sequence[AuditSink] = (),
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.engine = engine
        self.clock = clock or SystemClock(settings.clock_offset)
        self.host_id = host_id or settings.host_id or default_host_id()
        self.status = HostStatus(catalog_ok=catalog.ok)
        self.telemetry = telemetry or configure_telemetry()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._signals = 0
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(settings.worker_pool_size, thread_name_prefix="jobhost-run")
        self._ticker = Ticker(
            engine,
            catalog.jobs,
            host_id=self.host_id,
            lease_duration=settings.lease_duration,
            telemetry=self.telemetry,
        )
        self._envelope = RunEnvelope(
            engine,
            host_id=self.host_id,
            clock=self.clock,
            grace=settings.shutdown_grace,
            telemetry=self.telemetry,
            sinks=[*catalog.audit_sinks, *sinks],
            sink_timeout=settings.audit_sink_timeout,
            stopping=self._stopping.is_set,
        )
        self._watcher = SignalWatcher(engine, self._wake.set)
        self._heartbeat = threading.Thread(target=self._beat, name="jobhost-heartbeat", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Register this host and bring the store's schedules in line with the catalog."""
        with self.engine.begin() as connection:
            now = database_now(connection, self.clock)
            host_rows.register_host(
                connection,
                host_id=self.host_id,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                version=package_version("jobhost"),
                now=now,
                host_clock=self.clock(),
                heartbeat_seconds=max(int(self.settings.heartbeat_interval.total_seconds()), 1),
            )
        plan = self._ticker.sync(self._now())
        for added in plan.added:
            _log.info("plan: add %s (%s)", added.job_name, added.describe())
        for change in plan.changed:
            _log.info("plan: change %s: %s -> %s", change.job_name, change.before, change.after)
        for name in plan.orphaned:
            _log.warning("plan: %s is no longer declared; kept in the store as orphaned", name)
        self.status.store_ok = True
        self._watcher.start()
        self._heartbeat.start()
        _log.info(
            "host %s started: %d jobs, pool of %d, poll every %ss",
            self.host_id,
            len(self.catalog.jobs),
            self.settings.worker_pool_size,
            self.settings.poll_interval.total_seconds(),
        )

    def run_forever(self, install_signals: bool = True) -> int:
        """Start, loop until SIGTERM/SIGINT, shut down cleanly; return the exit code."""
        if install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.start()
        self.loop()
        self.shutdown()
        return 0

    def loop(self) -> None:
        while not self._stopping.is_set():
            sleep = self.turn()
            self._wake.wait(sleep)
            self._wake.clear()

    def turn(self) -> float:
        """One tick; return how long to sleep before the next."""
        poll = self.settings.poll_interval.total_seconds()
        try:
            now = self._now()
            result = self._ticker.tick(now, self._free_slots())
        except (OperationalError, DBAPIError) as error:
            self.status.store_ok = False
            _log.warning("store unreachable: %s; retrying", redact_text(str(error).splitlines()[0]))
            return min(poll, _STORE_DOWN_BACKOFF)
        except Exception as error:
            # A corrupt row or a bug must not stop the host: say so loudly and try again.
            _log.error(
                "tick failed: %s: %s", type(error).__name__, redact_text(str(error)), exc_info=error
            )
            return min(poll, _STORE_DOWN_BACKOFF)
        self.status.store_ok = True
        self.status.last_tick = time.monotonic()
        self.status.ticks += 1
        for claim, spec in result.claims:
            self._submit(claim, spec)
        if result.saturated:
            return poll  # a finishing worker sets the wake event
        if result.next_wake is None:
            return poll
        return min(max((result.next_wake - now).total_seconds(), _MIN_SLEEP), poll)

    def request_stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def shutdown(self) -> None:
        """Cancel running contexts, wait the grace period, record leftovers, release, leave."""
        self._stopping.set()
        self._watcher.stop()
        with self._lock:
            running = list(self._running.values())
        for item in running:
            item.cancellation.cancel("shutdown")
        grace = self.settings.shutdown_grace.total_seconds()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    break
            time.sleep(0.05)
        with self._lock:
            leftovers = list(self._running.values())
        for item in leftovers:
            self._record_cancelled(item)
        try:
            with self.engine.begin() as connection:
                host_rows.mark_stopped(
                    connection, self.host_id, database_now(connection, self.clock)
                )
        except (OperationalError, DBAPIError) as error:
            _log.warning("could not mark host stopped: %s", redact_text(str(error)))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.telemetry.shutdown(min(5.0, grace))
        _log.info("host %s stopped", self.host_id)

    # -- internals ---------------------------------------------------------------------------

    def _now(self) -> datetime:
        with self.engine.connect() as connection:
            return database_now(connection, self.clock)

    def _free_slots(self) -> int:
        if self._stopping.is_set():
            return 0
        with self._lock:
            return self.settings.worker_pool_size - len(self._running)

    def _submit(self, claim: Claim, spec: JobSpec) -> None:
        item = _Running(
            claim, spec, Cancellation(), lease_for(spec.declaration, self.settings.lease_duration)
        )
        with self._lock:
            self._running[claim.run_id] = item
        _log.info(
            "job %s: run %s started (%s, occurrence %s, attempt %d)",
            claim.job_name,
            claim.run_id,
            claim.source,
            claim.occurrence,
            claim.attempt,
        )
        self._pool.submit(self._execute, item)

    def _execute(self, item: _Running) -> None:
        try:
            outcome = self._envelope.run(item.claim, item.spec, item.cancellation)
            _log.info("job %s: run %s %s", item.claim.job_name, item.claim.run_id, outcome.outcome)
        except Exception:
            _log.exception(
                "job %s: run %s could not be completed", item.claim.job_name, item.claim.run_id
            )
        finally:
            with self._lock:
                self._running.pop(item.claim.run_id, None)
            self._wake.set()

    def _beat(self) -> None:
        interval = self.settings.heartbeat_interval.total_seconds()
        while not self._stopping.wait(interval):
            try:
                self._heartbeat_once()
            except Exception as error:  # the heartbeat thread must outlive any one failure
                _log.warning("heartbeat failed: %s", redact_text(str(error).splitlines()[0]))

    def _heartbeat_once(self) -> None:
        with self._lock:
            running = list(self._running.values())
        with self.engine.begin() as connection:
            now = database_now(connection, self.clock)
            host_rows.heartbeat(connection, self.host_id, now, self.clock())
            by_lease: dict[timedelta, list[str]] = {}
            for item in running:
                by_lease.setdefault(item.lease, []).append(item.claim.run_id)
            lost: set[str] = set()
            for lease, run_ids in by_lease.items():
                lost |= ledger.renew_leases(connection, self.host_id, run_ids, now + lease)
        for item in running:
            if item.claim.run_id in lost:
                _log.warning(
                    "job %s run %s lost its lease; cancelling it",
                    item.claim.job_name,
                    item.claim.run_id,
                )
                item.cancellation.cancel("lease lost")

    def _record_cancelled(self, item: _Running) -> None:
        try:
            with self.engine.begin() as connection:
                now = database_now(connection, self.clock)
                ledger.finish_run(
                    connection,
                    item.claim.run_id,
                    item.claim.job_name,
                    self.host_id,
                    ledger.Finish(
                        outcome="cancelled",
                        finished_at=now,
                        error_type="Shutdown",
                        error_message="host shut down; the executor did not stop within "
                        f"{self.settings.shutdown_grace.total_seconds():g}s",
                    ),
                )
        except (OperationalError, DBAPIError) as error:
            _log.error(
                "could not record run %s cancelled: %s", item.claim.run_id, redact_text(str(error))
            )

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            _log.warning("second signal: exiting at once")
            os._exit(1)
        _log.info("signal %s: stopping (again to exit at once)", signal.Signals(signum).name)
        self.request_stop()


def default_host_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
