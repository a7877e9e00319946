"""Backfills in the store: what the ledger says about a past range, and the backfills themselves,
each selected occurrence queued as a pending run (source ``backfill``, the lowest priority) and
counted by the state of its newest run.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import case, delete, exists, func, select, update
from sqlalchemy.engine import Connection

from jobhost.records import (
    PENDING,
    PRIORITY_BACKFILL,
    RUNNING,
    BackfillRecord,
    new_run_id,
    occurrence_key,
)
from jobhost.store.schema import backfills, runs
from jobhost.store.signals import notify

_LIVE = (PENDING, RUNNING)

# An occurrence of a backfill by its newest run: ``pending`` until its first run starts,
# ``claimed`` while a run of it runs or a retry waits, then ``succeeded`` or ``failed``.
_ITEM_STATE = case(
    (runs.c.outcome == "succeeded", "succeeded"),
    (runs.c.outcome == RUNNING, "claimed"),
    ((runs.c.outcome == PENDING) & (runs.c.source == "retry"), "claimed"),
    (runs.c.outcome == PENDING, "pending"),
    else_="failed",
).label("state")

__all__ = [
    "cancel_backfill",
    "create_backfill",
    "finish_backfills",
    "get_backfill",
    "last_outcomes",
    "list_backfills",
]


def last_outcomes(
    connection: Connection, job: str, start: datetime, end: datetime
) -> dict[datetime, str]:
    """Each occurrence of ``job`` in ``[start, end)`` that has a ledger row: its last attempt's
    outcome (``missed``/``skipped`` rows are attempt 0, so any real attempt outranks them)."""
    rows = connection.execute(
        select(runs.c.occurrence, runs.c.outcome)
        .where(runs.c.job_name == job, runs.c.occurrence >= start, runs.c.occurrence < end)
        .order_by(runs.c.occurrence, runs.c.attempt)
    )
    return {occurrence: outcome for occurrence, outcome in rows}


def create_backfill(
    connection: Connection,
    *,
    job: str,
    start: datetime,
    end: datetime,
    mode: str,
    reason: str | None,
    actor: str,
    concurrency: int,
    occurrences: Sequence[datetime],
    now: datetime,
) -> str:
    """Record a backfill, queue each of ``occurrences`` as its pending run (the next attempt of
    its occurrence, the backfill's retry budget starting there), wake the hosts; its id."""
    backfill_id = uuid.uuid4().hex
    connection.execute(
        backfills.insert().values(
            id=backfill_id,
            job_name=job,
            range_from=start,
            range_to=end,
            mode=mode,
            reason=reason,
            actor=actor,
            concurrency=concurrency,
            selected=len(occurrences),
            state="running" if occurrences else "done",
            created_at=now,
            finished_at=None if occurrences else now,
        )
    )
    if occurrences:
        # The highest attempt so far of each occurrence that has any.
        highest = (
            select(runs.c.occurrence, func.max(runs.c.attempt))
            .where(
                runs.c.job_name == job,
                runs.c.occurrence >= min(occurrences),
                runs.c.occurrence <= max(occurrences),
            )
            .group_by(runs.c.occurrence)
        )
        tried = {occurrence: int(attempt) for occurrence, attempt in connection.execute(highest)}
        connection.execute(
            runs.insert(),
            [
                {
                    "id": new_run_id(),
                    "job_name": job,
                    "occurrence": occurrence,
                    "attempt": tried.get(occurrence, 0) + 1,
                    "attempt_base": tried.get(occurrence, 0),
                    "source": "backfill",
                    "outcome": PENDING,
                    # In mode ``all`` a key of the backfill's own: a deliberate replay is not
                    # dropped by a target that deduplicates.
                    "idempotency_key": occurrence_key(job, occurrence)
                    + (f":backfill:{backfill_id}" if mode == "all" else ""),
                    "requested_by": actor,
                    "reason": reason,
                    "queued_at": now,
                    "not_before": now,
                    "priority": PRIORITY_BACKFILL,
                    "backfill_id": backfill_id,
                }
                for occurrence in occurrences
            ],
        )
        notify(connection)
    return backfill_id


def cancel_backfill(connection: Connection, backfill_id: str, now: datetime) -> bool:
    """Stop the backfill: its runs never started are deleted (``selected`` still counts
    them), its runs in flight go on; False if it was not running."""
    result = connection.execute(
        update(backfills)
        .where(backfills.c.id == backfill_id, backfills.c.state == "running")
        .values(state="cancelled")
    )
    if not result.rowcount:
        return False
    connection.execute(
        delete(runs).where(
            runs.c.backfill_id == backfill_id,
            runs.c.outcome == PENDING,
            runs.c.source == "backfill",
        )
    )
    finish_backfills(connection, now, [backfill_id])
    return True


def finish_backfills(connection: Connection, now: datetime, ids: Sequence[str]) -> None:
    """Finish each backfill of ``ids`` with no run of it pending or running any more (``done``
    when it was running)."""
    connection.execute(
        update(backfills)
        .where(
            backfills.c.finished_at.is_(None),
            ~exists().where(runs.c.backfill_id == backfills.c.id, runs.c.outcome.in_(_LIVE)),
            backfills.c.id.in_(list(ids)),
        )
        .values(
            state=case((backfills.c.state == "running", "done"), else_=backfills.c.state),
            finished_at=now,
        )
    )


def get_backfill(connection: Connection, backfill_id: str) -> BackfillRecord | None:
    found = list_backfills(connection, ids=[backfill_id])
    return found[0] if found else None


def list_backfills(
    connection: Connection,
    *,
    ids: Sequence[str] | None = None,
    job: str | None = None,
    limit: int = 50,
    items: bool = False,
) -> list[BackfillRecord]:
    """Backfills, newest first (``ids``: those; ``job``: that job's), with their items counted
    by state, and with ``items`` each item (see :attr:`BackfillRecord.items`)."""
    query = select(backfills).order_by(backfills.c.created_at.desc()).limit(limit)
    if ids is not None:
        query = query.where(backfills.c.id.in_(list(ids)))
    if job is not None:
        query = query.where(backfills.c.job_name == job)
    rows = [dict(r) for r in connection.execute(query).mappings()]
    if not rows:
        return []
    counts: dict[str, dict[str, int]] = {str(r["id"]): {} for r in rows}
    newer = runs.alias("newer")
    newest = ~exists().where(
        newer.c.backfill_id == runs.c.backfill_id,
        newer.c.occurrence == runs.c.occurrence,
        newer.c.attempt > runs.c.attempt,
    )
    by_state = (
        select(runs.c.backfill_id, _ITEM_STATE, func.count())
        .where(runs.c.backfill_id.in_(list(counts)), newest)
        .group_by(runs.c.backfill_id, _ITEM_STATE)
    )
    for backfill_id, state, count in connection.execute(by_state):
        counts[str(backfill_id)][str(state)] = int(count)
    listed = _items(connection, list(counts)) if items else {}
    found = []
    for row in rows:
        mine = counts[str(row["id"])]
        chosen = int(row.pop("selected"))
        # Occurrences whose run never started and was deleted by a cancel: still pending.
        never = chosen - sum(mine.values())
        if never > 0:
            mine["pending"] = mine.get("pending", 0) + never
        found.append(BackfillRecord(**row, counts=mine, items=listed.get(str(row["id"]), ())))
    return found


def _items(
    connection: Connection, ids: list[str]
) -> dict[str, tuple[tuple[datetime, str, str | None], ...]]:
    """Each backfill's occurrences that have a run, oldest first: (occurrence, state, first run
    id), its state by its newest attempt (see :data:`_ITEM_STATE`)."""
    rows = connection.execute(
        select(runs.c.backfill_id, runs.c.occurrence, _ITEM_STATE, runs.c.id)
        .where(runs.c.backfill_id.in_(ids))
        .order_by(runs.c.backfill_id, runs.c.occurrence, runs.c.attempt)
    )
    found: dict[str, dict[datetime, tuple[str, str | None]]] = {}
    for backfill_id, occurrence, state, run_id in rows:
        items = found.setdefault(str(backfill_id), {})
        first = items[occurrence][1] if occurrence in items else None
        items[occurrence] = (state, first or (None if state == "pending" else str(run_id)))
    return {
        backfill_id: tuple((o, state, run_id) for o, (state, run_id) in items.items())
        for backfill_id, items in found.items()
    }
