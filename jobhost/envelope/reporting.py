"""Reporting a recorded run, off the recorder's thread: metrics, the audit line, module sinks.

Each destination has a lane of its own: a bounded queue drained by one thread. The built-in
lane records the metrics and writes the JSON audit line; every sink a module adds gets a lane,
so a slow or hanging sink delays only its own records, never the ledger, the audit line or
another sink. A lane whose queue is full drops the record, counts it on the
``jobhost.audit.dropped`` metric and warns (once a minute at most, with the count). A lane's
thread ends after a while without work and starts again with the next record, so an idle host
holds no thread for it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from jobhost_contracts import AuditSink, RunAuditRecord

from jobhost.envelope.audit import BoundedSink, JsonLogSink, sink_name
from jobhost.envelope.telemetry import Telemetry

__all__ = ["LANE_CAPACITY", "Reporter"]

_log = logging.getLogger("jobhost.envelope")
LANE_CAPACITY = 10_000
"""Records a lane holds before it drops: at 1,000 runs a second, ten seconds of reporting."""
_IDLE_SECONDS = 10.0
_DROP_WARNING_SECONDS = 60.0


class Reporter:
    """Hands each recorded run to the metrics, the JSON audit line and every module sink."""

    def __init__(
        self,
        sinks: Sequence[AuditSink],
        telemetry: Telemetry,
        timeout: float,
        *,
        capacity: int = LANE_CAPACITY,
    ) -> None:
        self._telemetry = telemetry
        inline = [s for s in sinks if getattr(s, "inline", False)]
        builtin = [JsonLogSink()] if not any(isinstance(s, JsonLogSink) for s in inline) else []
        self._builtin = [*builtin, *inline]
        self._lanes = [_Lane("json-log", self._report_inline, capacity, self._dropped)]
        for sink in sinks:
            if sink in inline:
                continue
            bounded = BoundedSink(sink, timeout)
            self._lanes.append(
                _Lane(bounded.name, self._bounded_delivery(bounded), capacity, self._dropped)
            )

    def submit(self, entry: RunAuditRecord) -> None:
        """Queue ``entry`` on every lane; never blocks."""
        for lane in self._lanes:
            lane.offer(entry)

    def drain(self, timeout: float) -> bool:
        """Wait until every lane has delivered what it holds (at most ``timeout`` seconds)."""
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
            for result, count in (
                ("succeeded", units.succeeded),
                ("failed", units.failed),
                ("skipped_already_done", units.skipped_already_done),
            ):
                self._telemetry.units.add(count, {"job": entry.job_name, "result": result})
        for sink in self._builtin:
            try:
                sink.record(entry)
            except Exception as error:
                self._failed(sink_name(sink), entry, f"{type(error).__name__}: {error}")

    def _bounded_delivery(self, sink: BoundedSink) -> Callable[[RunAuditRecord], None]:
        def deliver(entry: RunAuditRecord) -> None:
            error = sink.record(entry)
            if error is not None:
                self._failed(sink.name, entry, error)

        return deliver

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
    """A bounded queue and the one thread that delivers from it."""

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
