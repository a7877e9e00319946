"""Deleting rows nothing needs any more (old runs, gone hosts, old idempotency keys), in
batches of ``batch_size`` rows, one transaction a batch, ``should_stop`` asked between them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, or_, select, tuple_
from sqlalchemy.engine import Connection, Engine

from jobhost.store.outcome_counts import forget_runs
from jobhost.store.runlogs import run_logs
from jobhost.store.schema import hosts, job_idempotency, runs

__all__ = ["purge"]


def purge(
    engine: Engine,
    *,
    now: datetime,
    ages: Mapping[str, timedelta],
    keep_last: int,
    batch_size: int,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict[str, int]:
    """Delete what is older than its age in ``ages`` (keys ``runs``, ``hosts``,
    ``idempotency_records``); how many rows of each went. Runs go with their log lines, the
    newest ``keep_last`` of every job and every run running or pending staying."""
    counts = dict.fromkeys(ages, 0)
    for name, age in ages.items():
        batch = (
            functools.partial(_purge_runs, keep_last=keep_last) if name == "runs" else _BY_AGE[name]
        )
        while not should_stop():
            with engine.begin() as connection:
                went = batch(connection, before=now - age, batch_size=batch_size)
            counts[name] += went
            if not went:
                break
    return counts


def _purge_runs(
    connection: Connection, *, before: datetime, batch_size: int, keep_last: int
) -> int:
    rank = (
        func.row_number()
        .over(partition_by=runs.c.job_name, order_by=(runs.c.queued_at.desc(), runs.c.id.desc()))
        .label("rank")
    )
    ranked = select(
        runs.c.id, runs.c.job_name, runs.c.queued_at, runs.c.outcome, runs.c.finished_at, rank
    ).subquery()
    found = connection.execute(
        select(ranked.c.id, ranked.c.job_name, ranked.c.outcome, ranked.c.finished_at)
        .where(
            ranked.c.rank > keep_last,
            ranked.c.queued_at < before,
            ranked.c.outcome.not_in(["running", "pending"]),
        )
        .limit(batch_size)
    ).all()
    ids = [row.id for row in found]
    if ids:
        # The chart's kept counts lose these runs in the same transaction.
        forget_runs(connection, [(row.job_name, row.outcome, row.finished_at) for row in found])
        connection.execute(delete(runs).where(runs.c.id.in_(ids)))
        connection.execute(delete(run_logs).where(run_logs.c.run_id.in_(ids)))
    return len(ids)


def _purge_hosts(connection: Connection, *, before: datetime, batch_size: int) -> int:
    # Hosts stopped before ``before``, or never heard from since then (killed).
    gone = or_(
        hosts.c.stopped_at < before,
        and_(hosts.c.stopped_at.is_(None), hosts.c.last_seen_at < before),
    )
    ids = list(connection.execute(select(hosts.c.id).where(gone).limit(batch_size)).scalars())
    if ids:
        connection.execute(delete(hosts).where(hosts.c.id.in_(ids)))
    return len(ids)


def _purge_idempotency(connection: Connection, *, before: datetime, batch_size: int) -> int:
    keys = connection.execute(
        select(job_idempotency.c.job_name, job_idempotency.c.key)
        .where(job_idempotency.c.recorded_at < before)
        .limit(batch_size)
    ).all()
    if keys:
        pair = tuple_(job_idempotency.c.job_name, job_idempotency.c.key)
        connection.execute(delete(job_idempotency).where(pair.in_([tuple(k) for k in keys])))
    return len(keys)


_BY_AGE: dict[str, Callable[..., int]] = {
    "hosts": _purge_hosts,
    "idempotency_records": _purge_idempotency,
}
