"""Audit sinks after the ledger: the JSON log line and whatever modules add.

Each sink a module adds gets the record in a thread of its own and a bounded time (the built-in
JSON line is written directly). A sink that raises or hangs
is reported with a warning and the ``jobhost.audit.sink_failures`` metric; the run's outcome is
already in the ledger and stays what it is.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime

from jobhost_contracts import AuditSink, RunAuditRecord

from jobhost.envelope.telemetry import Telemetry

__all__ = ["JsonLogSink", "deliver"]

_log = logging.getLogger("jobhost.envelope")


class JsonLogSink:
    """One structured JSON line per finished run on the ``jobhost.audit`` logger."""

    name = "json-log"
    inline = True
    """Built in and bounded by the logging system: called directly, not in a thread."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("jobhost.audit")

    def record(self, entry: RunAuditRecord) -> None:
        fields = {f.name: _plain(getattr(entry, f.name)) for f in dataclass_fields(entry)}
        self._logger.info(json.dumps({"event": "run.finished", **fields}, sort_keys=True))


def deliver(
    sinks: Sequence[AuditSink], entry: RunAuditRecord, telemetry: Telemetry, timeout: float
) -> list[str]:
    """Hand ``entry`` to every sink; return the names of the sinks that failed."""
    failed: list[str] = []
    for sink in sinks:
        error = _call_bounded(sink, entry, timeout)
        if error is None:
            continue
        name = getattr(sink, "name", type(sink).__name__)
        failed.append(name)
        telemetry.sink_failures.add(1, {"sink": name})
        _log.warning(
            "audit sink %s failed for run %s of %s: %s; the outcome (%s) stands",
            name,
            entry.run_id,
            entry.job_name,
            error,
            entry.outcome,
        )
    return failed


def _call_bounded(sink: AuditSink, entry: RunAuditRecord, timeout: float) -> str | None:
    if getattr(sink, "inline", False):
        try:
            sink.record(entry)
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return None
    errors: list[BaseException] = []

    def _target() -> None:
        try:
            sink.record(entry)
        except BaseException as error:  # a sink must never take the host down
            errors.append(error)

    worker = threading.Thread(target=_target, name="jobhost-audit", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return f"no answer within {timeout:g}s"
    if errors:
        return f"{type(errors[0]).__name__}: {errors[0]}"
    return None


def _plain(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value
