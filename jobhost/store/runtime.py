"""Runtime jobs (created through the API or ``jobhost jobs put``) and the change log (tables
made by migration 0005).

A runtime job is one row holding its definition as canonical JSON and a version that grows with
every change: the API's ``ETag`` is made from it. Every change is a row of ``job_changes`` with
who, what, when, and the definition before and after; its ever-growing id is what hosts watch
to know their runtime jobs changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Index,
    Integer,
    String,
    Table,
    Text,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from jobhost.clock import Clock
from jobhost.records import ChangeSearch, DesiredSchedule, JobChange, RuntimeJobRow
from jobhost.store.engine import UTCDateTime, writing
from jobhost.store.ledger import write_group_members
from jobhost.store.registry import orphan_schedules, sync_schedules
from jobhost.store.schema import metadata
from jobhost.store.signals import notify

__all__ = [
    "ChangeEntry",
    "RuntimeJobs",
    "Written",
    "acting_from",
    "deletions",
    "get_runtime_job",
    "insert_runtime_job",
    "job_changes",
    "list_runtime_jobs",
    "runtime_jobs",
    "search_changes",
    "write_runtime_job",
]

runtime_jobs = Table(
    "runtime_jobs",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("definition", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("updated_by", String(200), nullable=False),
)


job_changes = Table(
    "job_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime(), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", String(16), nullable=False),
    Column("job_name", String(200), nullable=False),
    Column("before", Text),
    Column("after", Text),
    Column("reason", Text),
    Column("surface", String(16)),
    Column("address", String(200)),
    Index("ix_job_changes_job_name_id", "job_name", "id"),
)


def acting_from(surface: str, address: str | None = None) -> None:
    """Log the changes this context makes as coming from ``surface`` (``cli``, ``api``,
    ``dashboard``) and, over HTTP, the client's ``address``. A context variable, which worker
    threads inherit, so the surface is said once where a request or command starts."""
    _ORIGIN.set((surface, None if address is None else address[:200]))


_ORIGIN: ContextVar[tuple[str | None, str | None]] = ContextVar(
    "jobhost_change_origin", default=(None, None)
)


def _dumps(value: Mapping[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def _row(row: Any) -> RuntimeJobRow:
    return RuntimeJobRow(**{**row._mapping, "definition": _loads(row.definition) or {}})


@dataclass(frozen=True)
class RuntimeJobs:
    """The runtime jobs, by name, and the newest change id when they were read."""

    change_id: int
    rows: list[RuntimeJobRow]


def list_runtime_jobs(
    connection: Connection, names: Sequence[str] | None = None, *, seen: int | None = None
) -> RuntimeJobs:
    """Every runtime job (or those of ``names``); none, with the change id it last ``seen``
    still the newest (a host's reload reads one integer while nothing changed)."""
    newest = connection.execute(select(func.max(job_changes.c.id))).scalar() or 0
    if newest == seen:
        return RuntimeJobs(newest, [])
    query = select(runtime_jobs).order_by(runtime_jobs.c.name)
    if names is not None:
        query = query.where(runtime_jobs.c.name.in_(list(names)))
    return RuntimeJobs(newest, [_row(r) for r in connection.execute(query)])


def get_runtime_job(
    connection: Connection, name: str, *, for_update: bool = False
) -> RuntimeJobRow | None:
    """The job's row; ``for_update`` holds it until the transaction ends, so writers of one
    job take turns instead of racing."""
    query = select(runtime_jobs).where(runtime_jobs.c.name == name)
    if for_update:
        query = query.with_for_update()
    row = connection.execute(query).first()
    return _row(row) if row is not None else None


def insert_runtime_job(
    connection: Connection,
    name: str,
    definition: Mapping[str, Any],
    *,
    actor: str,
    now: datetime,
) -> None:
    connection.execute(
        runtime_jobs.insert().values(
            name=name,
            kind=str(definition["kind"]),
            definition=_dumps(definition),
            version=1,
            created_at=now,
            created_by=actor,
            updated_at=now,
            updated_by=actor,
        )
    )


def _at_version(name: str, version: int) -> ColumnElement[bool]:
    return (runtime_jobs.c.name == name) & (runtime_jobs.c.version == version)


@dataclass(frozen=True)
class ChangeEntry:
    """Who makes a change, why, and when: the change-log entry's, and the change's own."""

    actor: str
    reason: str | None
    at: datetime

    def log(
        self,
        connection: Connection,
        action: str,
        job_name: str,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
    ) -> None:
        """Log one change, in the change's transaction, and wake every host."""
        surface, address = _ORIGIN.get()
        connection.execute(
            job_changes.insert().values(
                at=self.at,
                actor=self.actor,
                action=action,
                job_name=job_name,
                before=_dumps(before),
                after=_dumps(after),
                reason=self.reason,
                surface=surface,
                address=address,
            )
        )
        notify(connection)


def search_changes(
    connection: Connection, search: ChangeSearch, limit: int, *, oldest_first: bool = False
) -> list[JobChange]:
    """Up to ``limit`` changes that match, newest first (or the oldest first)."""
    order = job_changes.c.id if oldest_first else job_changes.c.id.desc()
    query = select(job_changes).order_by(order).limit(limit)
    if search.actor:
        query = query.where(job_changes.c.actor == search.actor)
    if search.action:
        query = query.where(job_changes.c.action == search.action)
    if search.job is not None:
        query = query.where(job_changes.c.job_name == search.job)
    if search.module:
        # A job's name starts with its module; autoescape keeps a `_` or `%` in it literal.
        query = query.where(job_changes.c.job_name.startswith(f"{search.module}.", autoescape=True))
    if search.since is not None:
        query = query.where(job_changes.c.at >= search.since)
    if search.before_id is not None:
        query = query.where(job_changes.c.id < search.before_id)
    if search.after_id is not None:
        query = query.where(job_changes.c.id > search.after_id)
    return [
        JobChange(**{**r._mapping, "before": _loads(r.before), "after": _loads(r.after)})
        for r in connection.execute(query)
    ]


def deletions(connection: Connection, names: Collection[str]) -> dict[str, JobChange]:
    """The newest ``delete`` change of each of ``names`` that has one."""
    if not names:
        return {}
    c = job_changes.c
    query = (
        select(c.id, c.at, c.actor, c.action, c.job_name, c.reason)
        .where(c.job_name.in_(sorted(names)), c.action == "delete")
        .order_by(c.id)
    )
    return {
        r.job_name: JobChange(**r._mapping, before=None, after=None)
        for r in connection.execute(query)
    }


@dataclass(frozen=True)
class Written:
    """What :func:`write_runtime_job` did: ``lost`` when another writer changed the job between
    the read and the write (nothing written); else the rows before and after."""

    before: RuntimeJobRow | None
    after: RuntimeJobRow | None
    changed: bool
    lost: bool = False


def write_runtime_job(
    engine: Engine,
    name: str,
    stored: dict[str, Any] | None,
    *,
    actor: str,
    clock: Clock,
    check: Callable[[RuntimeJobRow | None], None],
    schedule: Sequence[DesiredSchedule] = (),
    group: str | None = None,
    wait_for_writers: bool = False,
    reason: str | None = None,
) -> Written:
    """Create or replace runtime job ``name`` with ``stored``, its schedule row, its group and
    the change's entry, in one transaction; ``stored`` None removes it (its schedule row marked
    orphaned). ``check`` (``If-Match``...) is given the row as read and raises to refuse.
    ``wait_for_writers`` holds the row, so an unconditional write waits instead of losing."""
    try:
        with writing(engine, clock) as (connection, now):
            before = get_runtime_job(connection, name, for_update=wait_for_writers)
            check(before)
            if stored is None:
                if before is None:
                    return Written(None, None, changed=False)
                if not connection.execute(
                    delete(runtime_jobs).where(_at_version(name, before.version))
                ).rowcount:
                    return Written(before, None, changed=False, lost=True)
                orphan_schedules(connection, [name], now)
            elif before is None:
                insert_runtime_job(connection, name, stored, actor=actor, now=now)
            elif before.definition == stored:
                return Written(before, before, changed=False)
            elif not connection.execute(
                update(runtime_jobs)
                .where(_at_version(name, before.version))
                .values(
                    kind=str(stored["kind"]),
                    definition=_dumps(stored),
                    version=before.version + 1,
                    updated_at=now,
                    updated_by=actor,
                )
            ).rowcount:
                return Written(before, None, changed=False, lost=True)
            if stored is not None:
                sync_schedules(connection, schedule, now, prune=False)
                write_group_members(connection, {name: group})
            action = "delete" if stored is None else "create" if before is None else "change"
            was = before.definition if before is not None else None
            ChangeEntry(actor, reason, now).log(connection, action, name, was, stored)
            after = get_runtime_job(connection, name)
    except IntegrityError:  # a concurrent create of the same name came first
        return Written(None, None, changed=False, lost=True)
    return Written(before, after, changed=True)
