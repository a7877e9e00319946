"""Hosts: who is alive, and since when (their rows are written by :mod:`jobhost.store.ledger`)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import HostRecord
from jobhost.store.schema import hosts

__all__ = ["default_host_id", "hosts_at", "list_hosts"]


def list_hosts(connection: Connection) -> list[HostRecord]:
    rows = connection.execute(select(hosts).order_by(hosts.c.started_at)).mappings()
    return [HostRecord.from_row(r) for r in rows]


def hosts_at(connection: Connection, now: datetime, *, alive_only: bool = True) -> list[HostRecord]:
    """The hosts alive at ``now`` (every host without ``alive_only``)."""
    found = list_hosts(connection)
    return [host for host in found if host.alive(now)] if alive_only else found


def default_host_id() -> str:
    """A host id unique across machines and restarts: hostname, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
