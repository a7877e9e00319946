"""A manual run (or an operator's retry of one run) seen from the command that queued it: what
the store says before it is queued, how it goes while the command waits, and the claim of it
when the command runs it itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.clock import Clock
from jobhost.records import ClaimBatch, GroupSummary, HostRecord, RunRecord, ScheduleRecord
from jobhost.store.claims import ClaimRules, claim_work, live_runs
from jobhost.store.engine import database_now, reading
from jobhost.store.group_limits import group_summaries
from jobhost.store.hosts import list_hosts
from jobhost.store.reports import get_run, get_schedule

__all__ = ["Before", "RunSeen", "before_trigger", "claim_run", "run_progress"]


@dataclass(frozen=True)
class Before:
    """One job as a trigger finds it: its schedule row, its live runs, the live hosts, and the
    concurrency groups when asked for."""

    now: datetime
    row: ScheduleRecord | None
    running: list[RunRecord]
    hosts: list[HostRecord]
    groups: list[GroupSummary]


def before_trigger(engine: Engine, job: str, clock: Clock, *, with_groups: bool) -> Before:
    with reading(engine) as connection:
        now = database_now(connection, clock)
        return Before(
            now,
            get_schedule(connection, job),
            live_runs(connection, job, now),
            [h for h in list_hosts(connection) if h.alive(now)],
            group_summaries(connection, now) if with_groups else [],
        )


@dataclass(frozen=True)
class RunSeen:
    """A run (None: no such run) and, when asked for, whether any host is alive."""

    run: RunRecord | None
    hosts_alive: bool | None = None


def run_progress(engine: Engine, run_id: str, clock: Clock, *, check_hosts: bool) -> RunSeen:
    """Where run ``run_id`` stands; with ``check_hosts``, whether any host is alive."""
    with reading(engine) as connection:
        run = get_run(connection, run_id)
        alive = None
        if check_hosts:
            now = database_now(connection, clock)
            alive = any(h.alive(now) for h in list_hosts(connection))
    return RunSeen(run, alive)


def claim_run(
    engine: Engine, run_id: str, *, host_id: str, rules: ClaimRules, clock: Clock
) -> ClaimBatch:
    """The claim every host makes, narrowed to the one pending run ``run_id``."""
    with engine.begin() as connection:
        return claim_work(
            connection,
            host_id=host_id,
            now=database_now(connection, clock),
            slots=1,
            rules=rules,
            run_id=run_id,
        )
