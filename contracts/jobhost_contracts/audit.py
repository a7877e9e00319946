"""Audit sinks: where a module sends the record of every finished run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from jobhost_contracts.units import UnitCounts

__all__ = ["AuditSink", "RunAuditRecord"]


@dataclass(frozen=True, kw_only=True)
class RunAuditRecord:
    """One finished run, as the ledger, the span and the metrics saw it.

    ``units`` holds the counts of the run's fan-outs (``context.fan_out``), None without one;
    ``backfill_id`` names the backfill a run replays an occurrence for, None for any other run;
    ``result`` is the executor's ``Success`` value as the ledger keeps it: JSON text of at most
    4 kB (a value with no JSON form as its ``repr``; a longer one as ``{"truncated": true,
    "length": N, "head": "..."}``), None when it returned nothing or did not succeed.
    """

    job_name: str
    module: str
    run_id: str
    occurrence: datetime | None
    attempt: int
    source: str
    host_id: str
    outcome: str
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    error_type: str | None = None
    error_message: str | None = None
    trace_id: str | None = None
    units: UnitCounts | None = None
    backfill_id: str | None = None
    result: str | None = None


@runtime_checkable
class AuditSink(Protocol):
    """Receives every finished run. ``name`` appears in warnings and the failure metric.

    A sink that raises or takes longer than the host's ``audit_sink_timeout`` produces a warning
    and a metric; it never changes the run's outcome and never stops the host.
    """

    name: str

    def record(self, entry: RunAuditRecord) -> None: ...
