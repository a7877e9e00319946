"""Settling a backfill's items as their runs end, in the transaction that records the end.

An item is claimed with its first run; it settles when a run of it ends for good: succeeded
when one succeeded, failed when one ended otherwise with no retry queued (a retry carries the
backfill id, and its own end settles the item). The outcome write knows both, so
:func:`settle_ended` is one keyed update of the items that ended plus one update ending the
backfills with nothing left: a backfill running is done when no item is pending or claimed; a
cancelled one is finished when none is claimed.

Rarer ends (runs recorded abandoned, a queued retry cancelled) go through
:func:`settle_backfills`, which asks the ledger: an item whose runs include a success is
succeeded, one with no run pending or running any more is failed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, exists, update
from sqlalchemy.engine import Connection

from jobhost.store._sql import built
from jobhost.store.records import PENDING, RUNNING
from jobhost.store.schema import backfill_items, backfills, runs

__all__ = ["Ended", "settle_backfills", "settle_ended"]


@dataclass(frozen=True, slots=True)
class Ended:
    """A backfill's run whose end was just recorded, and whether it is the item's last."""

    backfill_id: str
    occurrence: datetime
    outcome: str
    retried: bool
    """A retry of it was queued: the item stays claimed until that retry ends."""


def settle_ended(connection: Connection, ended: Sequence[Ended], now: datetime) -> None:
    """Settle the items whose run ended for good; end the backfills with nothing left."""
    final = [
        {
            "b_backfill": e.backfill_id,
            "b_occurrence": e.occurrence,
            "b_state": "succeeded" if e.outcome == "succeeded" else "failed",
        }
        for e in ended
        if not e.retried or e.outcome == "succeeded"
    ]
    if not final:
        return
    connection.execute(built(connection, "settle-items", _settle_items), final)
    _finish(connection, sorted({e.backfill_id for e in ended}), now)


def settle_backfills(connection: Connection, now: datetime, ids: Collection[str]) -> None:
    """Settle the claimed items of backfills ``ids`` by their runs in the ledger; end what is
    finished."""
    if not ids:
        return
    mine = backfill_items.c.backfill_id.in_(sorted(ids))
    item_runs = and_(
        runs.c.backfill_id == backfill_items.c.backfill_id,
        runs.c.occurrence == backfill_items.c.occurrence,
    )
    claimed = and_(mine, backfill_items.c.state == "claimed")
    connection.execute(
        update(backfill_items)
        .where(claimed, exists().where(item_runs, runs.c.outcome == "succeeded"))
        .values(state="succeeded")
    )
    connection.execute(
        update(backfill_items)
        .where(claimed, ~exists().where(item_runs, runs.c.outcome.in_((PENDING, RUNNING))))
        .values(state="failed")
    )
    _finish(connection, sorted(ids), now)


def _finish(connection: Connection, ids: list[str], now: datetime) -> None:
    """One statement: a running backfill with no item pending or claimed is done; a cancelled
    one with no item claimed is finished."""
    items_of = backfill_items.c.backfill_id == backfills.c.id
    running = backfills.c.state == "running"
    connection.execute(
        update(backfills)
        .where(
            backfills.c.id.in_(ids),
            backfills.c.finished_at.is_(None),
            (
                running
                & ~exists().where(items_of, backfill_items.c.state.in_(("pending", "claimed")))
            )
            | (
                (backfills.c.state == "cancelled")
                & ~exists().where(items_of, backfill_items.c.state == "claimed")
            ),
        )
        .values(state=case((running, "done"), else_=backfills.c.state), finished_at=now)
    )


def _settle_items(_dialect: str) -> Any:
    return (
        update(backfill_items)
        .where(
            backfill_items.c.backfill_id == bindparam("b_backfill"),
            backfill_items.c.occurrence == bindparam("b_occurrence"),
            backfill_items.c.state == "claimed",
        )
        .values(state=bindparam("b_state"))
    )
