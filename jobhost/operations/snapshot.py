"""One consistent read of the store for the report and the health checks.

Everything is read in one read-only transaction, at the database's own time (the machine's on
SQLite), so a host's ``last_seen_at`` and the instant it is compared with come from one clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine

from jobhost.catalog import Catalog
from jobhost.catalog.model import suggest
from jobhost.errors import UnknownJobError
from jobhost.store import Clock, HostRecord, RunRecord, ScheduleRecord, SystemClock, reading
from jobhost.store.clock import database_now
from jobhost.store.hosts import list_hosts
from jobhost.store.records import PENDING, RUNNING
from jobhost.store.schema import runs, schedules

__all__ = [
    "NEWEST_FIRST",
    "NOT_ATTEMPTS",
    "RECENT",
    "StoreSnapshot",
    "read_snapshot",
    "resolve_job",
    "stored_job_names",
]

NEWEST_FIRST = (
    func.coalesce(runs.c.started_at, runs.c.queued_at).desc(),
    runs.c.occurrence.desc().nulls_last(),
    runs.c.attempt.desc(),
)
"""The ledger's order: newest first, by start (or queueing), then occurrence, then attempt."""

RECENT = 5
"""How many outcomes ``recent_outcomes`` shows."""

NOT_ATTEMPTS = ("missed", "skipped", PENDING)
"""Ledger rows that are not an attempt to run: ``last_run`` passes over them."""


@dataclass(frozen=True)
class StoreSnapshot:
    """What the store says, at ``now``."""

    now: datetime
    schedules: dict[str, ScheduleRecord]
    hosts: list[HostRecord]
    last_runs: dict[str, RunRecord] = field(default_factory=dict)
    recent_outcomes: dict[str, list[str]] = field(default_factory=dict)
    last_success: dict[str, datetime] = field(default_factory=dict)
    expired_runs: dict[str, list[RunRecord]] = field(default_factory=dict)

    @property
    def live_hosts(self) -> list[HostRecord]:
        return [host for host in self.hosts if host.alive(self.now)]


def read_snapshot(
    engine: Engine, names: Collection[str] = (), clock: Clock | None = None
) -> StoreSnapshot:
    """Schedules, hosts, and for every job in ``names`` or the store: its latest runs."""
    with reading(engine) as connection:
        now = database_now(connection, clock or SystemClock())
        rows = {
            row.job_name: row
            for row in (
                ScheduleRecord.from_row(r) for r in connection.execute(select(schedules)).mappings()
            )
        }
        snapshot = StoreSnapshot(now=now, schedules=rows, hosts=list_hosts(connection))
        for name in sorted({*names, *rows}):
            last = _last_attempt(connection, name)
            if last is not None:
                snapshot.last_runs[name] = last
            snapshot.recent_outcomes[name] = _recent(connection, name)
        success = (
            select(runs.c.job_name, func.max(runs.c.finished_at))
            .where(runs.c.outcome == "succeeded")
            .group_by(runs.c.job_name)
        )
        for name, finished in connection.execute(success):
            if isinstance(finished, datetime):
                snapshot.last_success[str(name)] = finished
        expired = select(runs).where(runs.c.outcome == RUNNING, runs.c.lease_expires_at < now)
        for r in connection.execute(expired).mappings():
            run = RunRecord.from_row(r)
            snapshot.expired_runs.setdefault(run.job_name, []).append(run)
    return snapshot


def stored_job_names(engine: Engine) -> set[str]:
    """Every job name the store knows, from its schedules and its ledger."""
    with reading(engine) as connection:
        named = set(connection.execute(select(schedules.c.job_name)).scalars())
        named |= set(connection.execute(select(runs.c.job_name).distinct()).scalars())
    return {str(name) for name in named}


def resolve_job(catalog: Catalog, stored: Collection[str], name: str) -> str:
    """``name`` if the catalog or the store knows it; :class:`UnknownJobError` otherwise."""
    if name in catalog.jobs or name in stored:
        return name
    known = sorted({*catalog.jobs, *stored})
    raise UnknownJobError(name, suggest(name, known))


def _last_attempt(connection: Connection, name: str) -> RunRecord | None:
    query = (
        select(runs)
        .where(runs.c.job_name == name, runs.c.outcome.not_in(NOT_ATTEMPTS))
        .order_by(*NEWEST_FIRST)
        .limit(1)
    )
    row = connection.execute(query).mappings().first()
    return RunRecord.from_row(row) if row is not None else None


def _recent(connection: Connection, name: str) -> list[str]:
    query = (
        select(runs.c.outcome)
        .where(runs.c.job_name == name, runs.c.outcome != PENDING)
        .order_by(*NEWEST_FIRST)
        .limit(RECENT)
    )
    return [str(outcome) for outcome in connection.execute(query).scalars()]
