"""Hosts: who is alive, since when, and how far each one's clock is from the database's."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from jobhost.store._sql import insert_ignoring_duplicates
from jobhost.store.records import HostRecord
from jobhost.store.schema import hosts

__all__ = [
    "default_host_id",
    "heartbeat",
    "list_hosts",
    "mark_stopped",
    "mark_synced",
    "register_host",
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
    """Insert this host's row, or revive it when a fixed ``host_id`` starts again."""
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
        connection.execute(update(hosts).where(hosts.c.id == host_id).values(**values))


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


def default_host_id() -> str:
    """A host id unique across machines and restarts: hostname, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
