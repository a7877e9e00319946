"""Audit sinks after the ledger: the JSON log line and whatever modules add.

Each sink a module adds gets the record in a thread of its own and a bounded time (the built-in
JSON line is written directly); :mod:`jobhost.envelope.reporting` calls them off the recorder's
thread. A sink that raises or hangs is reported with a warning and the
``jobhost.audit.sink_failures`` metric; the run's outcome is already in the ledger and stays
what it is.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, is_dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime

from jobhost_contracts import AuditSink, RunAuditRecord

__all__ = ["UNSUCCESSFUL", "BoundedSink", "JsonLogSink", "sink_name"]


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
