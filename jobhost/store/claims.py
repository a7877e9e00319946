"""Claiming work: the one path by which every run starts.

:func:`claim_work` takes, in one transaction, up to ``slots`` runs for one host: pending manual
run requests first (a person is waiting), then retries whose backoff has passed, then due
schedules found through the index on ``due_at``, oldest first. It locks what it reads (``FOR
UPDATE SKIP LOCKED`` on PostgreSQL, so replicas divide the work instead of queueing on it; on
SQLite the transaction holds the write lock), asks the caller's :class:`ClaimRules` what each
row means, and writes the answer for the whole batch in a handful of statements: run rows
inserted together, each job's fencing token advanced exactly once per run it starts, schedules
moved on. The run row's unique constraint on (job, occurrence, attempt) stays the last word: an
insert it refuses is dropped from the batch, never run twice.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy.engine import Connection

from jobhost.store.claim_batch import ClaimWork
from jobhost.store.claim_model import (
    Claim,
    ClaimBatch,
    ClaimRules,
    SchedulePlan,
    new_run_id,
    occurrence_key,
    occurrence_text,
    schedule_problem,
)
from jobhost.store.claim_reads import (
    due_job_names,
    due_retries,
    due_schedules,
    live_runs,
    pending_requests,
)

__all__ = [
    "Claim",
    "ClaimBatch",
    "ClaimRules",
    "SchedulePlan",
    "claim_work",
    "due_job_names",
    "live_runs",
    "new_run_id",
    "occurrence_key",
    "occurrence_text",
    "schedule_problem",
]


def claim_work(
    connection: Connection,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    request_slots: int = 0,
    skip: Collection[str] = (),
    request_id: str | None = None,
    retry_id: str | None = None,
    schedules_only: Collection[str] | None = None,
    requests: bool = True,
    retries: bool = True,
    early_until: datetime | None = None,
) -> ClaimBatch:
    """Claim up to ``slots`` runs (plus ``request_slots`` for manual requests only).

    ``skip`` names jobs not to touch (unknown to this host, or set aside as corrupt).
    ``request_id`` claims only that manual request, ``retry_id`` only that pending retry (an
    operator's retry of one run, run in the command's process); ``schedules_only`` limits the
    schedule part to those jobs (the one-job-at-a-time fallback after a batch failed).
    ``requests`` and ``retries`` False leave out the reads of pending manual requests and due
    retries: the caller knows there are none (a statement less each, on every turn of a busy
    host). ``early_until`` also claims, in the slots left, occurrences due after ``now`` up to
    it, each started at its own instant (its claim's ``started_at``): a host that claims just
    before an occurrence starts it on time, not a claim's length late. Only an occurrence that
    would run as it stands is taken early; any other row is left to the claim at its instant.
    """
    batch = ClaimBatch()
    work = ClaimWork(connection, host_id=host_id, now=now, rules=rules, batch=batch)
    skipped = list(skip)
    if schedules_only is None:
        asked = (
            pending_requests(
                connection,
                slots + request_slots if requests else 0,
                skip=skipped,
                request_id=request_id,
                rules=rules,
                batch=batch,
            )
            if retry_id is None
            else []
        )
        again = (
            due_retries(
                connection, now, slots, skip=skipped, rules=rules, batch=batch, run_id=retry_id
            )
            if request_id is None and (retries or retry_id is not None)
            else []
        )
        work.lock_rows({r.job_name for r in asked} | {r.job_name for r in again})
        for request in asked:
            if work.taken < slots + request_slots:
                work.start_request(request)
        for retry in again:
            if work.taken < slots:
                work.start_retry(retry)
    if request_id is None and retry_id is None and work.taken < slots:
        rows = due_schedules(
            connection,
            early_until or now,
            slots - work.taken,
            skip=skipped,
            only=schedules_only,
            batch=batch,
        )
        batch.unknown |= {r.job_name for r in rows if not rules.knows(r.job_name)}
        rows = [r for r in rows if rules.knows(r.job_name)]
        work.adopt(rows)
        for row in rows:
            if work.taken >= slots:
                break
            if row.due_at is not None and row.due_at > now:
                work.fire_early(row)
            else:
                work.fire(row)
    work.write()
    return batch
