"""The ledger of one job, newest first: every attempt, and every occurrence that did not run.

Newest means by start (or, for rows that never started, by when they were recorded), then by
occurrence, then by attempt, so a batch of occurrences recorded ``missed`` together still reads
newest first.
"""

from __future__ import annotations

from typing import Any

import orjson

from jobhost.operations.timefmt import iso_utc
from jobhost.records import RunRecord
from jobhost.store import Store

__all__ = ["OUTCOMES", "history_json", "read_history", "result_value", "run_json"]

OUTCOMES = (
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "abandoned",
    "skipped",
    "missed",
    "running",
    "pending",
)
"""Every outcome a ledger row can have (``pending``: a retry waiting for its backoff)."""


def read_history(
    store: Store, job: str, *, limit: int = 20, outcome: str | None = None
) -> list[RunRecord]:
    """Up to ``limit`` ledger rows of ``job``, newest first, optionally of one outcome."""
    return store.ledger_page(job, limit=limit, outcome=outcome)


def history_json(job: str, rows: list[RunRecord]) -> dict[str, Any]:
    """``{"job": name, "runs": [run, ...]}``, newest first."""
    return {"job": job, "runs": [run_json(run) for run in rows]}


def run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "occurrence": iso_utc(run.occurrence),
        "attempt": run.attempt,
        "source": run.source,
        "host": run.host_id,
        "requested_by": run.requested_by,
        "queued_at": iso_utc(run.queued_at),
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "duration_ms": run.duration_ms,
        "outcome": run.outcome,
        "reason": run.reason,
        "error_type": run.error_type,
        "error": run.error_message,
        "trace_id": run.trace_id,
        "units": _units_json(run),
        "backfill_id": run.backfill_id,
        "cancel": _cancel_json(run),
        "result": result_value(run.result),
    }


def result_value(text: str | None) -> Any:
    """A run's stored result as the value it is (``None`` when it kept none)."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # Written by hand or by something else than the envelope: shown as the text it is.
        return text


def _cancel_json(run: RunRecord) -> dict[str, Any] | None:
    """Who asked to cancel the run, when and why (``jobhost cancel``), or None."""
    if run.cancel_requested_by is None:
        return None
    return {
        "by": run.cancel_requested_by,
        "at": iso_utc(run.cancel_requested_at),
        "reason": run.cancel_reason,
    }


def _units_json(run: RunRecord) -> dict[str, int] | None:
    units = run.units
    if units is None:
        return None
    return {
        "total": units.total,
        "succeeded": units.succeeded,
        "failed": units.failed,
        "skipped_already_done": units.skipped_already_done,
    }
