"""Giving back runs a host claimed but never started (its claim-ahead queue, at shutdown).

A released run becomes a pending run due at once, keeping its id, occurrence, attempt, source,
idempotency key and backfill: the claim path starts it again, on another replica or on this host
after its restart, with a new fencing token, exactly as it starts a retry. Its job's schedule
lease, if the released run held it, is let go, so the job's overlap rule does not wait for a
lease that nobody renews. Only runs still ``running`` on this host and never started by it are
touched; a run another host took over in the meantime is left alone.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, RUNNING
from jobhost.store.schema import runs, schedules
from jobhost.store.signals import notify

__all__ = ["release_unstarted"]


def release_unstarted(
    connection: Connection, host_id: str, run_ids: Collection[str], now: datetime
) -> set[str]:
    """Put the runs back as pending, due at ``now``; return the ids actually released."""
    if not run_ids:
        return set()
    ids = sorted(run_ids)
    released = set(
        connection.execute(
            update(runs)
            .where(runs.c.id.in_(ids), runs.c.host_id == host_id, runs.c.outcome == RUNNING)
            .values(
                outcome=PENDING,
                host_id=None,
                started_at=None,
                lease_expires_at=None,
                not_before=now,
            )
            .returning(runs.c.id)
        ).scalars()
    )
    if released:
        connection.execute(
            update(schedules)
            .where(
                schedules.c.lease_run_id.in_(sorted(released)),
                schedules.c.lease_owner == host_id,
            )
            .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
        )
        # Other replicas look for due retries at once rather than at their next turn.
        notify(connection)
    return released
