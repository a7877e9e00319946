"""A backfill as the CLI, the API and the dashboard show it: one JSON shape, one progress line."""

from __future__ import annotations

from typing import Any

from jobhost.operations.timefmt import iso_utc
from jobhost.records import BackfillRecord

__all__ = ["backfill_json", "progress_line"]


def backfill_json(record: BackfillRecord) -> dict[str, Any]:
    """``{"id", "job", "from", "to", "mode", "state", ..., "selected", "done", "succeeded",
    "failed", "running", "pending"}``: ``done`` counts the settled occurrences."""
    counts = record.counts
    return {
        "id": record.id,
        "job": record.job_name,
        "from": iso_utc(record.range_from),
        "to": iso_utc(record.range_to),
        "mode": record.mode,
        "state": record.state,
        "reason": record.reason,
        "actor": record.actor,
        "concurrency": record.concurrency,
        "created_at": iso_utc(record.created_at),
        "finished_at": iso_utc(record.finished_at),
        "selected": record.selected,
        "done": record.settled,
        "succeeded": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0),
        "running": counts.get("claimed", 0),
        "pending": counts.get("pending", 0),
    }


def progress_line(record: BackfillRecord) -> str:
    """``backfill ID: 3 of 10 done (2 succeeded, 1 failed), 1 running, state running``."""
    counts = record.counts
    return (
        f"backfill {record.id}: {record.settled} of {record.selected} done "
        f"({counts.get('succeeded', 0)} succeeded, {counts.get('failed', 0)} failed), "
        f"{counts.get('claimed', 0)} running, state {record.state}"
    )
