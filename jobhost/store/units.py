"""Fan-out counts on the run ledger, written when a run's outcome is recorded."""

from __future__ import annotations

from jobhost_contracts import UnitCounts
from sqlalchemy import update
from sqlalchemy.engine import Connection

from jobhost.store.schema import runs

__all__ = ["record_unit_counts"]


def record_unit_counts(connection: Connection, run_id: str, counts: UnitCounts) -> None:
    """Store ``counts`` on run ``run_id``, in the caller's transaction (the one finishing it)."""
    connection.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(
            units_total=counts.total,
            units_succeeded=counts.succeeded,
            units_failed=counts.failed,
            units_skipped_already_done=counts.skipped_already_done,
        )
    )
