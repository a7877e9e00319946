"""A host's life in the store, one operation per step: start, catalog synced, heartbeat (with
its leases), a run stuck, the sweep for dead hosts' runs, stop. Each opens its own transaction.

What a job's retry policy makes of an abandoned run is the caller's to say (``retries_for``):
the store queues what it is given in the transaction that recorded the runs abandoned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import GroupSummary, RetriesFor, RunRecord
from jobhost.store import hosts as host_rows
from jobhost.store import ledger
from jobhost.store.backfills import finish_backfills
from jobhost.store.engine import database_now
from jobhost.store.group_limits import group_summaries
from jobhost.store.releasing import release_unstarted

__all__ = [
    "Beat",
    "abandon_dead_runs",
    "beat",
    "mark_run_stuck",
    "mark_stopped",
    "mark_synced",
    "release_runs",
    "renew_lease",
    "start_host",
]


@dataclass(frozen=True)
class Beat:
    """What a heartbeat learnt: the runs whose lease this host no longer holds, and each
    concurrency group's summary when asked for."""

    lost: set[str]
    groups: list[GroupSummary] | None


def start_host(
    engine: Engine,
    *,
    host_id: str,
    hostname: str,
    pid: int,
    version: str,
    clock: Clock,
    heartbeat_seconds: int,
    retries_for: RetriesFor,
) -> None:
    """Register the host (see :func:`~jobhost.store.hosts.register_host`) and record
    ``abandoned`` the runs an earlier process of ``host_id`` left running, queueing their
    retries."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        host_rows.register_host(
            connection,
            host_id=host_id,
            hostname=hostname,
            pid=pid,
            version=version,
            now=now,
            host_clock=clock(),
            heartbeat_seconds=heartbeat_seconds,
        )
        gone = host_rows.settle_earlier_incarnations(connection, host_id, now)
        ledger.queue_retries(connection, retries_for(gone, now), now)
        _finish_backfills_of(connection, gone, now)


def mark_synced(engine: Engine, host_id: str, *, catalog_version: str, clock: Clock) -> None:
    with engine.begin() as connection:
        host_rows.mark_synced(
            connection,
            host_id,
            catalog_version=catalog_version,
            now=database_now(connection, clock),
        )


def mark_stopped(engine: Engine, host_id: str, clock: Clock) -> None:
    with engine.begin() as connection:
        host_rows.mark_stopped(connection, host_id, database_now(connection, clock))


def beat(
    engine: Engine,
    host_id: str,
    clock: Clock,
    *,
    leases: Mapping[timedelta, Sequence[str]],
    schedule_lag: float | None,
    with_groups: bool = False,
) -> Beat:
    """Say the host is alive and extend the leases of its running runs, each group of run ids
    by its lease from now."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        host_rows.heartbeat(connection, host_id, now, clock(), schedule_lag=schedule_lag)
        lost: set[str] = set()
        for lease, run_ids in leases.items():
            lost |= ledger.renew_leases(connection, host_id, run_ids, now + lease)
        groups = group_summaries(connection, now) if with_groups else None
    return Beat(lost, groups)


def release_runs(engine: Engine, host_id: str, run_ids: Sequence[str], clock: Clock) -> set[str]:
    """Give back runs this host claimed and never started: pending again, due now (see
    :func:`~jobhost.store.releasing.release_unstarted`); return the ids released."""
    with engine.begin() as connection:
        return release_unstarted(connection, host_id, run_ids, database_now(connection, clock))


def mark_run_stuck(engine: Engine, run_id: str, host_id: str, message: str) -> None:
    with engine.begin() as connection:
        ledger.mark_stuck(connection, run_id, host_id, message)


def abandon_dead_runs(
    engine: Engine, now: datetime, *, implausible: timedelta, retries_for: RetriesFor
) -> bool:
    """Record ``abandoned`` the runs whose host stopped renewing their lease (see
    :func:`~jobhost.store.ledger.abandon_expired_runs`), queue their retries, and free the
    leases nobody holds any more; true if there was any."""
    with engine.begin() as connection:
        gone = ledger.abandon_expired_runs(connection, now, implausible=implausible)
        ledger.queue_retries(connection, retries_for(gone, now), now)
        _finish_backfills_of(connection, gone, now)
        freed = ledger.release_expired_leases(connection, now)
    return bool(gone) or freed > 0


def renew_lease(engine: Engine, host_id: str, run_id: str, lease: timedelta, clock: Clock) -> bool:
    """Extend one run's lease by ``lease`` from now; False when this host no longer holds it.
    A row another transaction holds at that moment is left for the next renewal (see
    :func:`~jobhost.store.ledger.renew_leases`)."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        return not ledger.renew_leases(connection, host_id, [run_id], now + lease)


def _finish_backfills_of(connection: Connection, gone: list[RunRecord], now: datetime) -> None:
    ids = sorted({r.backfill_id for r in gone if r.backfill_id is not None})
    if ids:
        finish_backfills(connection, now, ids)
