"""Claiming work: the one path by which every run starts.

:func:`claim_work` takes, in one transaction, up to ``slots`` runs for one host: pending runs in
(priority, not-before) order — manual runs first (a person is waiting), then retries whose
backoff has passed — then due schedules found through the index on ``due_at``, oldest first,
and last, in the workers still free, the occurrences of running backfills (see
:mod:`jobhost.store.backfill_claims`): scheduled work first, a backfill yields. It locks what it
reads (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so replicas divide the work instead of queueing
on it; on SQLite the transaction holds the write lock), asks the caller's :class:`ClaimRules`
what each row means, and writes the answer for the whole batch in a handful of statements: run
rows inserted together, each job's fencing token advanced exactly once per run it starts,
schedules moved on. The run row's unique constraint on (job, occurrence, attempt) stays the last
word: an insert it refuses is dropped from the batch, never run twice.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy.engine import Connection

from jobhost.records import (
    PRIORITY_MANUAL,
    ClaimBatch,
)
from jobhost.store.backfill_claims import claim_backfills
from jobhost.store.claim_batch import ClaimWork
from jobhost.store.claim_model import ClaimRules, schedule_problem
from jobhost.store.claim_reads import due_job_names, due_pending, due_schedules, live_runs

__all__ = [
    "ClaimRules",
    "claim_work",
    "due_job_names",
    "live_runs",
    "schedule_problem",
]


def claim_work(
    connection: Connection,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    manual_slots: int = 0,
    skip: Collection[str] = (),
    run_id: str | None = None,
    schedules_only: Collection[str] | None = None,
    pending: bool = True,
    early_until: datetime | None = None,
    backfill_slots: int = 0,
    backfill_id: str | None = None,
) -> ClaimBatch:
    """Claim up to ``slots`` runs (plus ``manual_slots`` for manual runs only), of which at
    most ``backfill_slots`` are backfilled occurrences, taken in the slots the rest left.

    ``skip`` names jobs not to touch (unknown to this host, or set aside as corrupt).
    ``run_id`` narrows the claim to that one pending run, ``backfill_id`` to that backfill's
    runs and due retries (a command that runs them itself);
    ``schedules_only`` limits it to those jobs' schedules (the one-job-at-a-time fallback after
    a batch failed). ``pending`` False leaves out the read of pending runs: the caller knows
    none is due (a statement less on every turn of a busy host). ``early_until`` also claims,
    in the slots left, occurrences due after ``now`` up to it, each started at its own instant
    (its claim's ``started_at``): a host that claims just before an occurrence starts it on
    time, not a claim's length late. Only an occurrence that would run as it stands is taken
    early; any other row is left to the claim at its instant.
    """
    batch = ClaimBatch()
    work = ClaimWork(connection, host_id=host_id, now=now, rules=rules, batch=batch)
    skipped = list(skip)
    if backfill_id is not None:
        found = claim_backfills(
            connection, host_id=host_id, now=now, slots=slots, rules=rules, only=backfill_id
        )
        batch.claims += found.claims
        batch.backfill_more, batch.backfill_yielded = found.more, found.yielded
        return batch
    if schedules_only is None and (pending or run_id is not None):
        waiting = due_pending(
            connection,
            now,
            slots + manual_slots,
            skip=skipped,
            rules=rules,
            batch=batch,
            run_id=run_id,
        )
        work.lock_rows({r.job_name for r in waiting})
        for run in waiting:
            if work.taken < slots + (manual_slots if run.priority == PRIORITY_MANUAL else 0):
                work.start_pending(run)
    if run_id is None and work.taken < slots:
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
    room = min(backfill_slots, slots - work.taken)
    if run_id is None and schedules_only is None and room > 0:
        # After the write: a job's fencing token is read as this batch left it.
        found = claim_backfills(
            connection, host_id=host_id, now=now, slots=room, rules=rules, skip=skipped
        )
        batch.claims += found.claims
        batch.backfill_more, batch.backfill_yielded = found.more, found.yielded
    return batch
