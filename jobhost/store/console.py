"""The dashboard's audit: every trigger, pause and resume asked for there, with who and why.

The table is created by migration 0004; it is declared here, beside the functions that use it,
on the schema's metadata.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Index, String, Table, Text, select
from sqlalchemy.engine import Connection, Engine

from jobhost.store.clock import Clock, database_now
from jobhost.store.schema import metadata
from jobhost.store.types import UTCDateTime

__all__ = ["ConsoleAction", "console_actions", "log_action", "recent_actions", "record_action"]

console_actions = Table(
    "console_actions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", String(16), nullable=False),
    Column("job_name", String(200), nullable=False),
    Column("reason", Text, nullable=False),
    Column("client", String(200)),
    Column("result", Text, nullable=False),
    Index("ix_console_actions_job_name_at", "job_name", "at"),
)


@dataclass(frozen=True, slots=True)
class ConsoleAction:
    id: str
    at: datetime
    actor: str
    action: str
    job_name: str
    reason: str
    client: str | None
    result: str


def log_action(
    engine: Engine,
    *,
    clock: Clock,
    actor: str,
    action: str,
    job_name: str,
    reason: str,
    client: str | None,
    result: str,
) -> ConsoleAction:
    """Write one audit row now, in a transaction of its own (after the action)."""
    with engine.begin() as connection:
        return record_action(
            connection,
            at=database_now(connection, clock),
            actor=actor,
            action=action,
            job_name=job_name,
            reason=reason,
            client=client,
            result=result,
        )


def record_action(
    connection: Connection,
    *,
    at: datetime,
    actor: str,
    action: str,
    job_name: str,
    reason: str,
    client: str | None,
    result: str,
) -> ConsoleAction:
    """Write one audit row (in the transaction of the action itself)."""
    made = ConsoleAction(uuid.uuid4().hex, at, actor, action, job_name, reason, client, result)
    connection.execute(
        console_actions.insert().values(
            id=made.id,
            at=at,
            actor=actor,
            action=action,
            job_name=job_name,
            reason=reason,
            client=client,
            result=result,
        )
    )
    return made


def recent_actions(connection: Connection, job_name: str, limit: int = 10) -> list[ConsoleAction]:
    """The job's newest audited actions, newest first."""
    query = (
        select(
            console_actions.c.id,
            console_actions.c.at,
            console_actions.c.actor,
            console_actions.c.action,
            console_actions.c.job_name,
            console_actions.c.reason,
            console_actions.c.client,
            console_actions.c.result,
        )
        .where(console_actions.c.job_name == job_name)
        .order_by(console_actions.c.at.desc())
        .limit(limit)
    )
    return [ConsoleAction(*row) for row in connection.execute(query)]
