"""Whether a failed run is dealt with: derived from the ledger and the change log, never stored.

A failure is resolved when its work later succeeded: a run of the same job and occurrence (a
retry, a backfill's run) finished ``succeeded`` after it; for a manual run, which has no
occurrence, a succeeded retry of it (followed through the change log's ``retry`` entries,
which name the run retried and the new run). An operator may also acknowledge a failure
without a rerun: an ``ack`` entry in the change log names the run. Everything else is open.

Reads cost what they are given: one indexed read of the successes of the failures'
occurrences (the unique index on job, occurrence, attempt), one of the failures' jobs' ``ack``
and ``retry`` entries since the oldest failure (the change log's index on job), and one by
primary key of the retries of manual runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import Resolution, RunRecord
from jobhost.store.runtime import job_changes
from jobhost.store.schema import runs

__all__ = ["ACK", "RETRY", "resolutions", "retry_links"]

ACK = "ack"
"""The change-log action of an operator acknowledging a failure."""

RETRY = "retry"
"""The change-log action of an operator's retry of one run."""


def resolutions(connection: Connection, failed: Sequence[RunRecord]) -> dict[str, Resolution]:
    """Of the failed runs ``failed``, those resolved, by run id."""
    if not failed:
        return {}
    changes = _changes(connection, failed)
    found = _acknowledged(changes)
    found.update(_by_occurrence(connection, [r for r in failed if r.id not in found]))
    manual = [r for r in failed if r.occurrence is None and r.id not in found]
    found.update(_by_retry_chain(connection, manual, changes))
    return found


def _changes(connection: Connection, failed: Sequence[RunRecord]) -> list[Any]:
    oldest = min(run.finished_at or run.queued_at for run in failed)
    query = (
        select(
            job_changes.c.action,
            job_changes.c.actor,
            job_changes.c.at,
            job_changes.c.before,
            job_changes.c.after,
            job_changes.c.reason,
        )
        .where(
            job_changes.c.job_name.in_(sorted({run.job_name for run in failed})),
            job_changes.c.action.in_((ACK, RETRY)),
            job_changes.c.at >= oldest,
        )
        .order_by(job_changes.c.id)
    )
    return list(connection.execute(query))


def _acknowledged(changes: Iterable[Any]) -> dict[str, Resolution]:
    found: dict[str, Resolution] = {}
    for change in changes:
        if change.action == ACK and (run_id := _run_id(change.after)) is not None:
            found.setdefault(
                run_id, Resolution("acknowledged", change.actor, change.at, None, change.reason)
            )
    return found


def _by_occurrence(connection: Connection, failed: Sequence[RunRecord]) -> dict[str, Resolution]:
    pairs = {(r.job_name, r.occurrence) for r in failed if r.occurrence is not None}
    if not pairs:
        return {}
    # Both columns by IN, not a row-value IN: SQLite scans the table for the latter, while
    # this probes the unique index on (job, occurrence, attempt) on both stores. It reads
    # every attempt of the pairs' cross product; those not asked for are dropped here.
    query = select(runs).where(
        runs.c.job_name.in_(sorted({job for job, _ in pairs})),
        runs.c.occurrence.in_(sorted({occurrence for _, occurrence in pairs})),
    )
    successes: dict[tuple[str, datetime], list[RunRecord]] = {}
    for row in connection.execute(query).mappings():
        attempt = RunRecord.from_row(row)
        assert attempt.occurrence is not None  # selected by occurrence
        key = (attempt.job_name, attempt.occurrence)
        if attempt.outcome == "succeeded" and key in pairs:
            successes.setdefault(key, []).append(attempt)
    found: dict[str, Resolution] = {}
    for run in failed:
        if run.occurrence is None:
            continue
        done = sorted(successes.get((run.job_name, run.occurrence), []), key=_finished)
        later = next((s for s in done if _after(s, run)), None)
        if later is not None:
            found[run.id] = _succeeded(later)
    return found


def _by_retry_chain(
    connection: Connection, manual: Sequence[RunRecord], changes: Iterable[Any]
) -> dict[str, Resolution]:
    if not manual:
        return {}
    retried: dict[str, list[str]] = {}
    for old, new in retry_links(c for c in changes if c.action == RETRY):
        retried.setdefault(old, []).append(new)
    chains = {run.id: _descendants(run.id, retried) for run in manual}
    wanted = sorted({run_id for chain in chains.values() for run_id in chain})
    if not wanted:
        return {}
    query = select(runs).where(runs.c.id.in_(wanted), runs.c.outcome == "succeeded")
    succeeded = {
        success.id: success
        for success in (RunRecord.from_row(row) for row in connection.execute(query).mappings())
    }
    found: dict[str, Resolution] = {}
    for run_id, chain in chains.items():
        first = next((succeeded[c] for c in chain if c in succeeded), None)
        if first is not None:
            found[run_id] = _succeeded(first)
    return found


def retry_links(changes: Iterable[Any]) -> list[tuple[str, str]]:
    """(run retried, new run) of each ``retry`` change-log row (``before``, ``after``)."""
    links: list[tuple[str, str]] = []
    for change in changes:
        old, new = _run_id(change.before), _run_id(change.after)
        if old is not None and new is not None:
            links.append((old, new))
    return links


def _descendants(run_id: str, retried: Mapping[str, list[str]]) -> list[str]:
    found: list[str] = []
    waiting = list(retried.get(run_id, []))
    while waiting:
        current = waiting.pop(0)
        if current not in found:
            found.append(current)
            waiting.extend(retried.get(current, []))
    return found


def _finished(run: RunRecord) -> datetime:
    return run.finished_at or run.queued_at


def _succeeded(run: RunRecord) -> Resolution:
    return Resolution("succeeded", run.requested_by or run.host_id, run.finished_at, run.id)


def _after(success: RunRecord, failure: RunRecord) -> bool:
    if success.finished_at is None or failure.finished_at is None:
        return True
    return success.finished_at >= failure.finished_at


def _run_id(document: str | None) -> str | None:
    if not document:
        return None
    value = json.loads(document)
    found = value.get("run_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
