"""Hosts: who is alive, since when, and how far each one's clock is from the database's. A
host's own row is written by :mod:`jobhost.store.ledger` (start, heartbeat, stop)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import HostRecord
from jobhost.store.schema import hosts

__all__ = ["all_hosts", "default_host_id", "list_hosts", "live_hosts"]


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
