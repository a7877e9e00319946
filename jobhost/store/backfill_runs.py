"""A backfill run by the command that made it, when no host is there to (a one-shot host): its
store operations, one transaction each."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Engine

from jobhost.clock import Clock
from jobhost.records import BackfillRecord, Claim, DesiredSchedule
from jobhost.store.backfills import finish_backfills, get_backfill
from jobhost.store.claims import ClaimRules, claim_work
from jobhost.store.engine import database_now
from jobhost.store.registry import sync_schedules
from jobhost.store.reports import get_schedule

__all__ = ["claim_backfill", "ensure_scheduled", "settled_backfill"]


def ensure_scheduled(
    engine: Engine, job: str, desired: Sequence[DesiredSchedule], clock: Clock
) -> None:
    """Give ``job`` a schedule row from ``desired`` if no host has yet, as a starting host
    would."""
    with engine.begin() as connection:
        if get_schedule(connection, job) is None:
            sync_schedules(connection, desired, database_now(connection, clock), prune=False)


def claim_backfill(
    engine: Engine, backfill_id: str, *, host_id: str, rules: ClaimRules, slots: int, clock: Clock
) -> list[Claim]:
    """Claim up to ``slots`` of the backfill's occurrences and due retries: the one claim,
    narrowed to the backfill (which it first finishes when nothing of it is left)."""
    with engine.begin() as connection:
        return claim_work(
            connection,
            host_id=host_id,
            now=database_now(connection, clock),
            slots=slots,
            rules=rules,
            backfill_id=backfill_id,
        ).claims


def settled_backfill(engine: Engine, backfill_id: str, clock: Clock) -> BackfillRecord | None:
    """The backfill, finished first when nothing of it is left pending or running."""
    with engine.begin() as connection:
        finish_backfills(connection, database_now(connection, clock), [backfill_id])
        return get_backfill(connection, backfill_id)
