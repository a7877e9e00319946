"""The dashboard's session versions: a sign-out ends every session of that person, on every
replica, by moving their version on.

A session carries the version it was started under; one whose version is no longer the stored
one has ended. The table is created by migration 0006.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, String, Table, select, update
from sqlalchemy.engine import Connection

from jobhost.store.schema import metadata
from jobhost.store.types import UTCDateTime

__all__ = ["console_sessions", "end_sessions", "session_version"]

console_sessions = Table(
    "console_sessions",
    metadata,
    Column("who", String(200), primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("changed_at", UTCDateTime(), nullable=False),
)


def session_version(connection: Connection, who: str) -> int:
    """The current session version of ``who`` (0 until they first sign out)."""
    query = select(console_sessions.c.version).where(console_sessions.c.who == who)
    found = connection.execute(query).scalar_one_or_none()
    return int(found) if found is not None else 0


def end_sessions(connection: Connection, who: str, now: datetime) -> int:
    """End every session of ``who``; the new version."""
    moved = connection.execute(
        update(console_sessions)
        .where(console_sessions.c.who == who)
        .values(version=console_sessions.c.version + 1, changed_at=now)
    )
    if moved.rowcount == 0:
        connection.execute(console_sessions.insert().values(who=who, version=1, changed_at=now))
    return session_version(connection, who)
