"""Backfills in the store: what the ledger says about a past range, and the backfills themselves.

:func:`last_outcomes` is one statement over the run table's unique index (job, occurrence,
attempt): the range's rows in order, of which the last attempt of each occurrence speaks for it.
A backfill is recorded with its selected occurrences as items; hosts claim them
(:mod:`jobhost.store.backfill_claims`); readers count them by state.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import exists, func, select, update
from sqlalchemy.engine import Connection

from jobhost.store.schema import backfill_items, backfills, runs
from jobhost.store.signals import notify

__all__ = [
    "BackfillRecord",
    "backfill_items_of",
    "backfill_with_items",
    "cancel_backfill",
    "create_backfill",
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
        .where(
            runs.c.job_name == job,
            runs.c.occurrence >= start,
            runs.c.occurrence < end,
        )
        .order_by(runs.c.occurrence, runs.c.attempt)
    )
    found: dict[datetime, str] = {}
    for occurrence, outcome in rows:
        found[occurrence] = outcome
    return found


@dataclass(frozen=True, slots=True)
class BackfillRecord:
    """A backfill as the store holds it, with the count of its items in each state."""

    id: str
    job_name: str
    range_from: datetime
    range_to: datetime
    mode: str
    reason: str | None
    actor: str
    concurrency: int
    state: str
    created_at: datetime
    finished_at: datetime | None
    counts: dict[str, int] = field(default_factory=dict)
    """Item state (pending, claimed, succeeded, failed) → how many."""

    @property
    def selected(self) -> int:
        return sum(self.counts.values())

    @property
    def settled(self) -> int:
        return self.counts.get("succeeded", 0) + self.counts.get("failed", 0)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


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
    """Record a backfill of ``occurrences`` and wake the hosts; return its id.

    A backfill with nothing selected is recorded done at once.
    """
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
            state="running" if occurrences else "done",
            created_at=now,
            finished_at=None if occurrences else now,
        )
    )
    if occurrences:
        connection.execute(
            backfill_items.insert(),
            [
                {"backfill_id": backfill_id, "occurrence": o, "state": "pending"}
                for o in occurrences
            ],
        )
        notify(connection)
    return backfill_id


def cancel_backfill(connection: Connection, backfill_id: str, now: datetime) -> bool:
    """Stop claiming the backfill's items (its runs in flight go on); False if not running."""
    result = connection.execute(
        update(backfills)
        .where(backfills.c.id == backfill_id, backfills.c.state == "running")
        .values(state="cancelled")
    )
    if not result.rowcount:
        return False
    connection.execute(
        update(backfills)
        .where(
            backfills.c.id == backfill_id,
            ~exists().where(
                backfill_items.c.backfill_id == backfill_id, backfill_items.c.state == "claimed"
            ),
        )
        .values(finished_at=now)
    )
    return True


def get_backfill(connection: Connection, backfill_id: str) -> BackfillRecord | None:
    found = list_backfills(connection, ids=[backfill_id])
    return found[0] if found else None


def list_backfills(
    connection: Connection,
    *,
    ids: Sequence[str] | None = None,
    job: str | None = None,
    limit: int = 50,
) -> list[BackfillRecord]:
    """Backfills, newest first (``ids``: those; ``job``: that job's), with their items counted
    by state."""
    query = select(backfills).order_by(backfills.c.created_at.desc()).limit(limit)
    if ids is not None:
        query = query.where(backfills.c.id.in_(list(ids)))
    if job is not None:
        query = query.where(backfills.c.job_name == job)
    rows = [dict(r) for r in connection.execute(query).mappings()]
    if not rows:
        return []
    counts: dict[str, dict[str, int]] = {str(r["id"]): {} for r in rows}
    for backfill_id, state, count in connection.execute(
        select(backfill_items.c.backfill_id, backfill_items.c.state, func.count())
        .where(backfill_items.c.backfill_id.in_(list(counts)))
        .group_by(backfill_items.c.backfill_id, backfill_items.c.state)
    ):
        counts[str(backfill_id)][str(state)] = int(count)
    return [BackfillRecord(**r, counts=counts[str(r["id"])]) for r in rows]


def backfill_items_of(
    connection: Connection, backfill_id: str
) -> list[tuple[datetime, str, str | None]]:
    """(occurrence, state, first run id) of each item of the backfill, oldest first."""
    rows = connection.execute(
        select(backfill_items.c.occurrence, backfill_items.c.state, backfill_items.c.run_id)
        .where(backfill_items.c.backfill_id == backfill_id)
        .order_by(backfill_items.c.occurrence)
    )
    return [(o, str(s), r) for o, s, r in rows]


def backfill_with_items(
    connection: Connection, backfill_id: str
) -> tuple[BackfillRecord | None, list[tuple[datetime, str, str | None]]]:
    """The backfill and its occurrences, read together (none for an unknown id)."""
    record = get_backfill(connection, backfill_id)
    return record, backfill_items_of(connection, backfill_id) if record is not None else []
