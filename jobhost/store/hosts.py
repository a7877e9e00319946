"""Hosts: who is alive, since when, and how far each one's clock is from the database's."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from jobhost.errors import HostIdInUseError
from jobhost.records import RUNNING, HostRecord, RunRecord
from jobhost.store._sql import insert_ignoring_duplicates, locked
from jobhost.store.schema import hosts, runs

__all__ = [
    "all_hosts",
    "default_host_id",
    "heartbeat",
    "list_hosts",
    "live_hosts",
    "mark_stopped",
    "mark_synced",
    "register_host",
    "settle_earlier_incarnations",
]


def register_host(
    connection: Connection,
    *,
    host_id: str,
    hostname: str,
    pid: int,
    version: str,
    now: datetime,
    host_clock: datetime,
    heartbeat_seconds: int,
) -> None:
    """Insert this host's row, or revive it when a fixed ``host_id`` starts again.

    Raises :class:`HostIdInUseError` when the row belongs to another host that is alive: two
    processes under one id would renew each other's leases and hide each other's death.
    """
    values = {
        "hostname": hostname,
        "pid": pid,
        "version": version,
        "started_at": now,
        "last_seen_at": now,
        "host_clock_at": host_clock,
        "heartbeat_seconds": heartbeat_seconds,
        "stopped_at": None,
    }
    inserted = insert_ignoring_duplicates(connection, hosts, [{"id": host_id, **values}], ["id"])
    if not inserted:
        # Read after the insert: on PostgreSQL it waited for a concurrent start's row.
        row = (
            connection.execute(locked(connection, select(hosts).where(hosts.c.id == host_id)))
            .mappings()
            .first()
        )
        if row is not None:
            _refuse_if_taken(HostRecord.from_row(row), hostname, pid, now)
        connection.execute(update(hosts).where(hosts.c.id == host_id).values(**values))


def settle_earlier_incarnations(
    connection: Connection, host_id: str, now: datetime
) -> list[RunRecord]:
    """Record ``abandoned`` every run still running under ``host_id``; return them.

    Called by a process of ``host_id`` that has just registered and claimed nothing yet: every
    such run belongs to an earlier incarnation of the id, which is dead (:func:`register_host`
    refuses an id a live process holds). Without this, a restart under a fixed id would keep
    the id alive and its dead runs ``running`` for ever.
    """
    # Imported here: the readers of hosts (every report and read-only command) record nothing,
    # and the ledger's writers bring the backfills, signals and claims with them.
    from jobhost.store.ledger import abandon_runs

    query = locked(
        connection, select(runs).where(runs.c.host_id == host_id, runs.c.outcome == RUNNING)
    )
    earlier = [RunRecord.from_row(r) for r in connection.execute(query).mappings()]
    message = f"host {host_id} restarted: the process that ran this run is gone"
    return abandon_runs(connection, earlier, now, {r.id: message for r in earlier})


def heartbeat(
    connection: Connection,
    host_id: str,
    now: datetime,
    host_clock: datetime,
    *,
    schedule_lag: float | None = None,
) -> None:
    connection.execute(
        update(hosts)
        .where(hosts.c.id == host_id)
        .values(
            last_seen_at=now,
            host_clock_at=host_clock,
            stopped_at=None,
            schedule_lag_seconds=schedule_lag,
        )
    )


def mark_synced(
    connection: Connection, host_id: str, *, catalog_version: str, now: datetime
) -> None:
    """Record which catalog the host runs, and that it has written it to the store."""
    connection.execute(
        update(hosts)
        .where(hosts.c.id == host_id)
        .values(catalog_version=catalog_version, synced_at=now)
    )


def mark_stopped(connection: Connection, host_id: str, now: datetime) -> None:
    connection.execute(update(hosts).where(hosts.c.id == host_id).values(stopped_at=now))


def list_hosts(connection: Connection) -> list[HostRecord]:
    rows = connection.execute(select(hosts).order_by(hosts.c.started_at)).mappings()
    return [HostRecord.from_row(r) for r in rows]


def all_hosts(connection: Connection, _now: datetime) -> list[HostRecord]:
    """Every host, for a reader that judges them at ``now`` itself."""
    return list_hosts(connection)


def live_hosts(connection: Connection, now: datetime) -> list[HostRecord]:
    """The hosts alive at ``now``."""
    return [host for host in list_hosts(connection) if host.alive(now)]


def default_host_id() -> str:
    """A host id unique across machines and restarts: hostname, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _refuse_if_taken(record: HostRecord, hostname: str, pid: int, now: datetime) -> None:
    if not record.alive(now):
        return
    if record.hostname == hostname and (record.pid == pid or not _process_exists(record.pid)):
        return  # this very process, or one on this machine that is gone (kill -9, restart)
    seen = max((now - record.last_seen_at).total_seconds(), 0.0)
    window = 3 * max(record.heartbeat_seconds, 1)
    raise HostIdInUseError(
        f"host_id {record.id!r} is in use by a live host (hostname {record.hostname}, pid "
        f"{record.pid}, last seen {seen:.0f}s ago); give every replica its own host_id, or leave "
        "host_id unset for a generated one. If that host is gone, it stops counting as live "
        f"{window}s after its last heartbeat: start again then"
    )


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True
