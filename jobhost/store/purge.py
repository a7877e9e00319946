"""Deleting rows nothing needs any more: gone hosts, finished manual requests, old idempotency keys.

The run ledger's own purge keeps the newest rows of every job and lives with the retention job
(:mod:`jobhost.builtin.retention`); these tables have no such rule, only an age. Each function
deletes at most ``batch_size`` rows in the caller's transaction and returns how many went, so the
caller bounds its transactions and can stop between batches.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, or_, select, tuple_
from sqlalchemy.engine import Connection

from jobhost.store.schema import hosts, job_idempotency, run_requests

__all__ = ["FINISHED_REQUESTS", "purge_hosts", "purge_idempotency", "purge_requests"]

FINISHED_REQUESTS = ("started", "refused")
"""Manual requests whose story is over: the run they started is in the ledger, or they were
refused. A pending request is never purged: it still waits for a host."""


def purge_hosts(connection: Connection, *, before: datetime, batch_size: int) -> int:
    """Hosts stopped before ``before``, or never heard from since then (killed)."""
    gone = or_(
        hosts.c.stopped_at < before,
        and_(hosts.c.stopped_at.is_(None), hosts.c.last_seen_at < before),
    )
    ids = list(connection.execute(select(hosts.c.id).where(gone).limit(batch_size)).scalars())
    if ids:
        connection.execute(delete(hosts).where(hosts.c.id.in_(ids)))
    return len(ids)


def purge_requests(connection: Connection, *, before: datetime, batch_size: int) -> int:
    """Finished manual requests made before ``before``."""
    ids = list(
        connection.execute(
            select(run_requests.c.id)
            .where(
                run_requests.c.status.in_(FINISHED_REQUESTS),
                run_requests.c.requested_at < before,
            )
            .limit(batch_size)
        ).scalars()
    )
    if ids:
        connection.execute(delete(run_requests).where(run_requests.c.id.in_(ids)))
    return len(ids)


def purge_idempotency(connection: Connection, *, before: datetime, batch_size: int) -> int:
    """Idempotency records written before ``before``."""
    keys = connection.execute(
        select(job_idempotency.c.job_name, job_idempotency.c.key)
        .where(job_idempotency.c.recorded_at < before)
        .limit(batch_size)
    ).all()
    if keys:
        pair = tuple_(job_idempotency.c.job_name, job_idempotency.c.key)
        connection.execute(delete(job_idempotency).where(pair.in_([tuple(k) for k in keys])))
    return len(keys)
