"""A manual request (or an operator's retry of one run) seen from the command that made it:
what the store says before it is made, how it goes while the command waits, and the claim of it
when the command runs it itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from jobhost.store.claims import ClaimBatch, ClaimRules, claim_work, live_runs
from jobhost.store.clock import Clock, database_now
from jobhost.store.engine import reading
from jobhost.store.group_limits import GroupSummary, group_summaries
from jobhost.store.hosts import list_hosts
from jobhost.store.operations import get_request, get_schedule
from jobhost.store.records import HostRecord, RequestRecord, RunRecord, ScheduleRecord
from jobhost.store.reports import get_run

__all__ = [
    "Before",
    "Progress",
    "RunSeen",
    "before_trigger",
    "claim_request",
    "claim_retry",
    "request_progress",
    "run_progress",
]


@dataclass(frozen=True)
class Before:
    """One job as a trigger finds it: its schedule row, its live runs, the live hosts, and the
    concurrency groups when asked for."""

    now: datetime
    row: ScheduleRecord | None
    running: list[RunRecord]
    hosts: list[HostRecord]
    groups: list[GroupSummary]


@dataclass(frozen=True)
class Progress:
    """A request and its run (None until claimed); ``hosts_alive`` when asked for."""

    request: RequestRecord | None
    run: RunRecord | None
    hosts_alive: bool | None = None


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


def request_progress(
    engine: Engine, request_id: str, clock: Clock, *, check_hosts: bool = False
) -> Progress:
    """Where ``request_id`` stands; with ``check_hosts``, whether any host is alive while it is
    still pending."""
    with reading(engine) as connection:
        request = get_request(connection, request_id)
        run = get_run(connection, request.run_id) if request and request.run_id else None
        alive = None
        if check_hosts and request is not None and request.status == "pending":
            now = database_now(connection, clock)
            alive = any(h.alive(now) for h in list_hosts(connection))
    return Progress(request, run, alive)


def claim_request(
    engine: Engine, request_id: str, *, host_id: str, rules: ClaimRules, clock: Clock
) -> ClaimBatch:
    """The same claim a host makes, for this one request."""
    with engine.begin() as connection:
        return claim_work(
            connection,
            host_id=host_id,
            now=database_now(connection, clock),
            slots=0,
            request_slots=1,
            rules=rules,
            request_id=request_id,
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


def claim_retry(
    engine: Engine, run_id: str, *, host_id: str, rules: ClaimRules, clock: Clock
) -> ClaimBatch:
    """The claim every retry goes through, for this one pending run."""
    with engine.begin() as connection:
        return claim_work(
            connection,
            host_id=host_id,
            now=database_now(connection, clock),
            slots=1,
            rules=rules,
            retry_id=run_id,
        )
