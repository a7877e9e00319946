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

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime

from jobhost_contracts import AuditSink, RunAuditRecord

from jobhost.envelope.telemetry import Telemetry

__all__ = ["LANE_CAPACITY", "UNSUCCESSFUL", "BoundedSink", "JsonLogSink", "Reporter", "sink_name"]

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


# -- the sinks ---------------------------------------------------------------------------------
# Audit sinks after the ledger: the JSON log line and whatever modules add.
#
# Each sink a module adds gets the record in a thread of its own and a bounded time (the built-in
# JSON line is written directly); :mod:`jobhost.envelope.reporting` calls them off the recorder's
# thread. A sink that raises or hangs is reported with a warning and the
# ``jobhost.audit.sink_failures`` metric; the run's outcome is already in the ledger and stays
# what it is.

UNSUCCESSFUL = frozenset({"failed", "timed_out", "abandoned"})
"""Outcomes a person reading the log must see without parsing the audit line."""
_FIRST_LINE = 300


class JsonLogSink:
    """One structured JSON line per finished run on the ``jobhost.audit`` logger, and for a run
    that failed, timed out or was abandoned a WARNING a person reads, on ``jobhost.run``:
    ``job shop.remind run 4fe9... failed (attempt 1 of a manual run): ValueError: no ledger``.
    """

    name = "json-log"
    inline = True
    """Built in and bounded by the logging system: called directly, not in a thread."""

    def __init__(
        self, logger: logging.Logger | None = None, people: logging.Logger | None = None
    ) -> None:
        self._logger = logger or logging.getLogger("jobhost.audit")
        # A logger of its own: a pipeline reading jobhost.audit as JSON lines stays JSON.
        self._people = people or logging.getLogger("jobhost.run")

    def record(self, entry: RunAuditRecord) -> None:
        fields = {name: getattr(entry, name) for name in _field_names(type(entry))}
        if entry.result is not None:
            # The line carries the value, not its text: a log pipeline reads it as JSON.
            fields["result"] = json.loads(entry.result)
        self._logger.info(_LINE.encode({"event": "run.finished", **fields}))
        if entry.outcome in UNSUCCESSFUL:
            self._people.warning(
                "job %s run %s %s (attempt %d of a %s run): %s",
                entry.job_name,
                entry.run_id,
                entry.outcome,
                entry.attempt,
                entry.source,
                _first_line(entry),
            )


def _first_line(entry: RunAuditRecord) -> str:
    message = (entry.error_message or "").strip().splitlines()
    first = message[0] if message else "no message"
    if len(first) > _FIRST_LINE:
        first = f"{first[:_FIRST_LINE]}..."
    kind = entry.error_type
    # A business Failure's type says nothing its text does not; an exception's type does.
    return first if kind in {None, "Failure"} else f"{kind}: {first}"


def sink_name(sink: AuditSink) -> str:
    """The name a sink reports under (``name``, else its class's)."""
    return str(getattr(sink, "name", type(sink).__name__))


class BoundedSink:
    """A module's sink, called in a thread of its own and given ``timeout`` seconds to answer.

    A call that does not answer in time keeps its thread; the next record waits for it (within
    the same bound) before the sink is called again, so a hanging sink holds one thread, not one
    per record.
    """

    def __init__(self, sink: AuditSink, timeout: float) -> None:
        self.name = sink_name(sink)
        self._sink = sink
        self._timeout = timeout
        self._busy: threading.Thread | None = None

    def record(self, entry: RunAuditRecord) -> str | None:
        """Hand ``entry`` to the sink; return what went wrong, or ``None``."""
        if self._busy is not None:
            self._busy.join(self._timeout)
            if self._busy.is_alive():
                return f"no answer within {self._timeout:g}s (an earlier record still holds it)"
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
            return f"no answer within {self._timeout:g}s"
        if errors:
            return f"{type(errors[0]).__name__}: {errors[0]}"
        return None


def _field_names(kind: type[RunAuditRecord]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclass_fields(kind))
    return names


_FIELD_NAMES: dict[type[RunAuditRecord], tuple[str, ...]] = {}


def _plain(value: object) -> object:
    """A value JSON has no word for, as the line writes it: asked only of those (the C encoder
    writes the rest), at a thousand lines a second."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")


_LINE = json.JSONEncoder(sort_keys=True, default=_plain)
