"""The run ledger after a claim, and the host's life around it: outcomes recorded (with the last
lines of their logs), retries queued, leases renewed and stuck runs said by the heartbeat,
unstarted runs given back, dead hosts' runs abandoned, the host's own row started and stopped
(and who is alive), the concurrency groups it writes at start; and what a running job writes
itself: its log lines and its fenced state (:class:`StoreJobState`).

The operations that take an engine open one transaction each. One transaction records every
run a host finished since the last write, in a few statements whatever their number. What a
job's retry policy makes of an abandoned run is the caller's to say (``retries_for``).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from jobhost_contracts import StaleLeaseError
from sqlalchemy import bindparam, case, delete, func, select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.errors import HostIdInUseError
from jobhost.records import (
    PENDING,
    RUNNING,
    Chunk,
    GroupSummary,
    HostRecord,
    LogWrites,
    Outcome,
    RetriesFor,
    RetryRequest,
    RunRecord,
)
from jobhost.store.backfills import finish_backfills
from jobhost.store.engine import (
    BatchValue,
    Database,
    built,
    database,
    database_now,
    execute_batch,
    execute_isolating,
    from_json,
    insert_returning_new,
    locked,
    reading,
    rows_json,
    writing,
)
from jobhost.store.runlogs import run_logs
from jobhost.store.schema import (
    IS_RUNNING,
    concurrency_groups,
    hosts,
    job_idempotency,
    job_state,
    runs,
    schedules,
)
from jobhost.store.signals import notify

_log = logging.getLogger("jobhost.store")
_NONE: Mapping[Any, Any] = MappingProxyType({})

__all__ = [
    "Recorded",
    "Recording",
    "StoreJobState",
    "abandon_dead_runs",
    "abandon_expired_runs",
    "append_chunks",
    "beat",
    "default_host_id",
    "delete_value",
    "get_value",
    "group_summaries",
    "hosts_at",
    "list_hosts",
    "put_value",
    "record_finished",
    "record_outcomes",
    "register_host",
    "release_runs",
    "renew_leases",
    "schedule_token",
    "start_host",
    "trim_lines",
    "write_group_limits",
    "write_group_members",
]


@dataclass(frozen=True)
class Recording:
    """The runs host ``host_id`` finished, to record with their lines: ``outcomes_at(now)`` gives
    their outcomes at the store's instant ``now`` (``store_time()`` when given, else read on
    ``clock``); see :func:`record_outcomes` for ``isolate``."""

    host_id: str
    outcomes_at: Callable[[datetime], Sequence[Outcome]]
    clock: Clock
    store_time: Clock | None = None
    isolate: bool = True


@dataclass(frozen=True)
class Recorded:
    """What :func:`record_finished` wrote, and the ledger's outcome of each run it did not."""

    now: datetime
    entries: list[Outcome]
    recorded: set[str]
    verdicts: dict[str, str] = field(default_factory=dict)


def record_finished(
    engine: Engine, logs: LogWrites, finished: Recording | None = None
) -> Recorded | None:
    """Write ``logs`` and record the runs ``finished``; without ``finished`` only the lines (of
    runs still going) are written, no time is read and None is returned. The lines go in the
    same transaction as the outcomes: whoever sees a run finished sees all its lines."""
    with engine.begin() as connection:
        for run_id, above, below in logs.trims:
            trim_lines(connection, run_id, above=above, below=below)
        append_chunks(connection, logs.chunks)
        if finished is None:
            return None
        store_time = finished.store_time
        now = store_time() if store_time is not None else database_now(connection, finished.clock)
        entries = list(finished.outcomes_at(now))
        host_id, isolate = finished.host_id, finished.isolate
        recorded = record_outcomes(connection, host_id, entries, now, isolate=isolate)
        others = [e.run_id for e in entries if e.run_id not in recorded]
        verdicts: dict[str, str] = {}
        if others:
            # Runs another replica recorded (abandoned): the ledger's word on each.
            query = select(runs.c.id, runs.c.outcome).where(runs.c.id.in_(others))
            verdicts = {str(run_id): str(outcome) for run_id, outcome in connection.execute(query)}
    return Recorded(now, entries, recorded, verdicts)


def start_host(
    engine: Engine,
    *,
    host_id: str,
    hostname: str,
    pid: int,
    version: str,
    clock: Clock,
    heartbeat_seconds: int,
    retries_for: RetriesFor,
) -> None:
    """Register the host and record ``abandoned`` the runs an earlier, dead process of
    ``host_id`` left running (else a restart under a fixed id keeps them running for ever)."""
    with writing(engine, clock) as (connection, now):
        register_host(
            connection,
            host_id=host_id,
            hostname=hostname,
            pid=pid,
            version=version,
            now=now,
            host_clock=clock(),
            heartbeat_seconds=heartbeat_seconds,
        )
        query = locked(
            connection, select(runs).where(runs.c.host_id == host_id, runs.c.outcome == RUNNING)
        )
        earlier = [RunRecord.from_row(r) for r in connection.execute(query).mappings()]
        message = f"host {host_id} restarted: the process that ran this run is gone"
        gone = _abandon_runs(connection, earlier, now, {r.id: message for r in earlier})
        _after_abandoning(connection, gone, now, retries_for)


@dataclass(frozen=True)
class Beat:
    """The runs whose lease this host no longer holds, and the groups when asked for."""

    lost: set[str]
    groups: list[GroupSummary] | None


def beat(
    engine: Engine,
    host_id: str,
    clock: Clock,
    *,
    leases: Mapping[timedelta, Sequence[str]] = _NONE,
    schedule_lag: float | None = None,
    with_groups: bool = False,
    stuck: Mapping[str, str] = _NONE,
    stopped: bool = False,
) -> Beat:
    """Say the host is alive (with ``stopped``, its last beat: that it stopped) and extend the
    leases of its running runs, each group of run ids by its lease from now. Each run of
    ``stuck`` (run id → message) still this host's and running is said stuck: its executor
    ignored cancellation; it keeps its lease until the thread ends, so a ``forbid`` job cannot
    start beside its own stuck code."""
    with writing(engine, clock) as (connection, now):
        if stopped:
            _update_host(connection, host_id, stopped_at=now)
        else:
            _update_host(
                connection,
                host_id,
                last_seen_at=now,
                host_clock_at=clock(),
                stopped_at=None,
                schedule_lag_seconds=schedule_lag,
            )
        _mark_stuck(connection, host_id, stuck)
        lost: set[str] = set()
        for lease, run_ids in leases.items():
            lost |= renew_leases(connection, host_id, run_ids, now + lease)
        groups = group_summaries(connection, now) if with_groups else None
    return Beat(lost, groups)


def release_runs(engine: Engine, host_id: str, run_ids: Sequence[str], clock: Clock) -> set[str]:
    """Give back runs this host claimed but never started (at shutdown), as pending runs due at
    once, and the job leases they held; return the ids released. A released run keeps its id
    and work, and any claim starts it again with a new fencing token; its lease is let go so the
    overlap rule does not wait for a lease nobody renews."""
    if not run_ids:
        return set()
    with writing(engine, clock) as (connection, now):
        released = set(
            connection.execute(
                update(runs)
                .where(
                    runs.c.id.in_(sorted(run_ids)),
                    runs.c.host_id == host_id,
                    runs.c.outcome == RUNNING,
                )
                .values(
                    outcome=PENDING,
                    host_id=None,
                    started_at=None,
                    lease_expires_at=None,
                    not_before=now,
                )
                .returning(runs.c.id)
            ).scalars()
        )
        if released:
            connection.execute(
                update(schedules)
                .where(
                    schedules.c.lease_run_id.in_(sorted(released)),
                    schedules.c.lease_owner == host_id,
                )
                .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
            )
            # Other replicas look for due retries at once rather than at their next turn.
            notify(connection)
    return released


def abandon_dead_runs(
    engine: Engine, now: datetime, *, implausible: timedelta, retries_for: RetriesFor
) -> bool:
    """Record ``abandoned`` the runs whose host stopped renewing their lease (see
    :func:`abandon_expired_runs`), queue their retries, and free the job leases that expired
    with no running run behind them; true if there was any."""
    with engine.begin() as connection:
        gone = abandon_expired_runs(connection, now, implausible=implausible)
        _after_abandoning(connection, gone, now, retries_for)
        freed = connection.execute(
            update(schedules)
            .where(
                schedules.c.lease_expires_at < now,
                schedules.c.lease_run_id.not_in(select(runs.c.id).where(runs.c.outcome == RUNNING)),
            )
            .values(lease_owner=None, lease_expires_at=None, lease_run_id=None)
        )
    return bool(gone) or (freed.rowcount or 0) > 0


def record_outcomes(
    connection: Connection,
    host_id: str,
    outcomes: Sequence[Outcome],
    now: datetime,
    *,
    isolate: bool = True,
) -> set[str]:
    """Record the outcomes this host still owns (another replica's ``abandoned`` verdict stands);
    return the run ids recorded. ``isolate`` tries each row alone when the batch is refused."""
    if not outcomes:
        return set()
    finishes = [
        {
            "b_id": o.run_id,
            "started_at": o.started_at,
            "outcome": o.end.outcome,
            "finished_at": o.end.finished_at,
            "error_type": o.end.error_type,
            "error_message": o.end.error_message,
            "trace_id": o.end.trace_id,
            "result": o.end.result,
        }
        for o in outcomes
    ]
    if database(connection).batches and not isolate:
        # One statement finds the runs still this host's and finishes them.
        statement = built(connection, "finish-own-runs:json", _finish_own_runs)
        mine = set(
            connection.execute(statement, {**rows_json(finishes), "host": host_id}).scalars()
        )
        refused: list[dict[str, Any]] = []
    else:
        ids = [o.run_id for o in outcomes]
        query = built(connection, "own-running", _own_running)
        mine = set(connection.execute(query, {"ids": ids, "host": host_id}).scalars())
        refused = execute_batch(
            connection,
            "finish-runs",
            _finish_runs,
            isolate=isolate,
            rows=[row for row in finishes if row["b_id"] in mine],
        )
    recorded = [o for o in outcomes if o.run_id in mine]
    if not recorded:
        return set()
    if refused:
        # Left running: the database refused this run's row; the caller keeps the outcome.
        kept = {row["b_id"] for row in refused}
        recorded = [o for o in recorded if o.run_id not in kept]
    _summarise(
        connection,
        [
            (
                o.job_name,
                o.run_id,
                o.end.outcome,
                o.started_at,
                o.end.finished_at,
                o.end.error_message,
            )
            for o in recorded
        ],
        isolate=isolate,
    )
    for item in recorded:
        if item.units is not None:
            connection.execute(
                update(runs)
                .where(runs.c.id == item.run_id)
                .values(
                    units_total=item.units.total,
                    units_succeeded=item.units.succeeded,
                    units_failed=item.units.failed,
                    units_skipped_already_done=item.units.skipped_already_done,
                )
            )
    queue_retries(connection, [o.retry for o in recorded if o.retry is not None], now)
    ended = {o.backfill_id for o in recorded if o.backfill_id is not None}
    if ended:
        # A backfill ends with the write of its last run (its retry, when one was queued).
        finish_backfills(connection, now, sorted(ended))
    if any(o.awaited for o in recorded):
        notify(connection)
    return {o.run_id for o in recorded}


def queue_retries(connection: Connection, retries: Sequence[RetryRequest], now: datetime) -> None:
    """Queue the next attempts; any replica takes each once its ``not_before`` passes."""
    if not retries:
        return
    connection.execute(
        runs.insert(),
        [
            {
                "id": r.run_id,
                "job_name": r.job_name,
                "occurrence": r.occurrence,
                "attempt": r.attempt,
                "source": r.source,
                "outcome": PENDING,
                "idempotency_key": r.idempotency_key,
                "requested_by": r.requested_by,
                "reason": r.reason,
                "queued_at": now,
                "not_before": r.not_before,
                "backfill_id": r.backfill_id,
                "attempt_base": r.attempt_base,
            }
            for r in retries
        ],
    )


def renew_leases(
    connection: Connection, host_id: str, run_ids: Collection[str], until: datetime
) -> set[str]:
    """Extend the leases of this host's running runs; return the ids it no longer holds. A row
    another transaction holds (nearly always the recorder finishing the run) is left for the
    next beat rather than waited for, which deadlocked; a lease outlasts two beats."""
    if not run_ids:
        return set()
    ids = list(run_ids)
    mine = (runs.c.id.in_(ids), runs.c.host_id == host_id, runs.c.outcome == RUNNING)
    renewed = set(
        connection.execute(
            update(runs)
            .where(runs.c.id.in_(locked(connection, select(runs.c.id).where(*mine))))
            .values(lease_expires_at=until)
            .returning(runs.c.id)
        ).scalars()
    )
    held = renewed
    if len(renewed) < len(ids):
        # Which of the others are still this host's (left out, locked) and which are not.
        held = renewed | set(connection.execute(select(runs.c.id).where(*mine)).scalars())
    if renewed:
        # One job's schedule row that cannot be written must not cost every run its renewal.
        execute_isolating(
            connection,
            update(schedules)
            .where(
                schedules.c.lease_owner == host_id,
                schedules.c.lease_run_id == bindparam("b_run"),
            )
            .values(lease_expires_at=until),
            [{"b_run": run_id} for run_id in sorted(renewed)],
        )
    return set(ids) - held


def abandon_expired_runs(
    connection: Connection, now: datetime, *, implausible: timedelta
) -> list[RunRecord]:
    """Record ``abandoned`` every running run whose lease expired (or lies beyond
    ``implausible``, which no renewal sets) and whose host is gone: stopped, or silent for three
    heartbeats. A live host whose lease ran out while the store was away renews it on return."""
    candidates = [
        RunRecord.from_row(r)
        for r in connection.execute(
            locked(
                connection,
                select(runs).where(
                    IS_RUNNING,
                    (runs.c.lease_expires_at < now) | (runs.c.lease_expires_at > now + implausible),
                ),
            )
        ).mappings()
    ]
    if not candidates:
        return []
    query = select(hosts).where(hosts.c.id.in_({r.host_id for r in candidates if r.host_id}))
    owners = map(HostRecord.from_row, connection.execute(query).mappings())
    alive = {h.id for h in owners if h.alive(now)}
    gone = [r for r in candidates if r.host_id not in alive]
    return _abandon_runs(connection, gone, now, {r.id: _abandoned_message(r) for r in gone})


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
    """Insert this host's row, or revive it; :class:`HostIdInUseError` when another live host
    holds the id (two processes under one id would hide each other's death)."""
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
    inserted = insert_returning_new(connection, hosts, [{"id": host_id, **values}], ["id"])
    if not inserted:
        # Read after the insert: on PostgreSQL it waited for a concurrent start's row.
        row = (
            connection.execute(locked(connection, select(hosts).where(hosts.c.id == host_id)))
            .mappings()
            .first()
        )
        if row is not None:
            _refuse_if_taken(HostRecord.from_row(row), hostname, pid, now)
        _update_host(connection, host_id, **values)


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


# Concurrency groups: a host writes ``[concurrency_limits]`` and its jobs' groups when it starts
# (the newest start wins); a runtime job's group is written with its schedule row.


def write_group_limits(connection: Connection, limits: Mapping[str, int], now: datetime) -> None:
    """Make the stored limits exactly ``limits``."""
    query = select(concurrency_groups.c.name, concurrency_groups.c.slots)
    stored = {str(name): int(slots) for name, slots in connection.execute(query)}
    gone = sorted(set(stored) - set(limits))
    if gone:
        connection.execute(delete(concurrency_groups).where(concurrency_groups.c.name.in_(gone)))
    added = [
        {"name": n, "slots": s, "updated_at": now} for n, s in limits.items() if n not in stored
    ]
    if added:
        connection.execute(concurrency_groups.insert(), added)
    changed = [
        {"b_name": n, "slots": s, "updated_at": now}
        for n, s in limits.items()
        if n in stored and stored[n] != s
    ]
    if changed:
        connection.execute(
            update(concurrency_groups)
            .where(concurrency_groups.c.name == bindparam("b_name"))
            .values(slots=bindparam("slots"), updated_at=bindparam("updated_at")),
            changed,
        )


def write_group_members(connection: Connection, members: Mapping[str, str | None]) -> None:
    """Store each named job's group (None: none); rows of other jobs are left alone."""
    if not members:
        return
    query = select(schedules.c.job_name, schedules.c.concurrency_group).where(
        schedules.c.job_name.in_(sorted(members))
    )
    stored = {str(name): group for name, group in connection.execute(query)}
    changed = [
        {"b_job": name, "group": group}
        for name, group in members.items()
        if name in stored and stored[name] != group
    ]
    if changed:
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == bindparam("b_job"))
            .values(concurrency_group=bindparam("group"), group_waiting_since=None),
            changed,
        )


def group_summaries(connection: Connection, now: datetime) -> list[GroupSummary]:
    """Every stored group with its limit, running runs and waiting work, by name."""
    query = select(concurrency_groups.c.name, concurrency_groups.c.slots)
    limits = {str(name): int(slots) for name, slots in connection.execute(query)}
    if not limits:
        return []
    running = {
        str(group): int(count)
        for group, count in connection.execute(
            select(schedules.c.concurrency_group, func.count())
            .select_from(runs.join(schedules, runs.c.job_name == schedules.c.job_name))
            .where(
                schedules.c.concurrency_group.is_not(None),
                runs.c.outcome == RUNNING,
                runs.c.lease_expires_at >= now,
            )
            .group_by(schedules.c.concurrency_group)
        )
    }
    # Waiting: due occurrences held back by their group, and pending runs likewise.
    due = select(schedules.c.concurrency_group, schedules.c.job_name).where(
        schedules.c.group_waiting_since.is_not(None),
        schedules.c.concurrency_group.is_not(None),
        schedules.c.due_at.is_not(None),
    )
    pending = (
        select(schedules.c.concurrency_group, runs.c.job_name)
        .select_from(runs.join(schedules, runs.c.job_name == schedules.c.job_name))
        .where(runs.c.outcome == PENDING, runs.c.group_waiting_since.is_not(None))
    )
    waiting: dict[str, list[str]] = {}
    for group, job in [*connection.execute(due), *connection.execute(pending)]:
        if group is not None:
            waiting.setdefault(str(group), []).append(str(job))
    return [
        GroupSummary(
            name=str(name),
            limit=int(slots),
            running=int(running.get(name, 0)),
            waiting=len(waiting.get(name, [])),
            waiting_jobs=tuple(sorted(set(waiting.get(name, [])))),
        )
        for name, slots in sorted(limits.items())
    ]


def _update_host(connection: Connection, host_id: str, **values: Any) -> None:
    connection.execute(update(hosts).where(hosts.c.id == host_id).values(**values))


def _mark_stuck(connection: Connection, host_id: str, stuck: Mapping[str, str]) -> None:
    # Every beat says it again while the run is stuck: a row another transaction holds is left
    # for the next one, as a renewal is.
    if not stuck:
        return
    mine = (runs.c.id.in_(sorted(stuck)), runs.c.host_id == host_id, runs.c.outcome == RUNNING)
    connection.execute(
        update(runs)
        .where(runs.c.id.in_(locked(connection, select(runs.c.id).where(*mine))))
        .values(error_type="Stuck", error_message=case(dict(stuck), value=runs.c.id))
    )


def _after_abandoning(
    connection: Connection, gone: list[RunRecord], now: datetime, retries_for: RetriesFor
) -> None:
    queue_retries(connection, retries_for(gone, now), now)
    ids = sorted({r.backfill_id for r in gone if r.backfill_id is not None})
    if ids:
        finish_backfills(connection, now, ids)


def _abandon_runs(
    connection: Connection, gone: list[RunRecord], now: datetime, messages: dict[str, str]
) -> list[RunRecord]:
    """Record ``abandoned`` each run of ``gone`` still running, fencing its job; return those."""
    if not gone:
        return []
    refused = execute_isolating(
        connection,
        update(runs)
        .where(runs.c.id == bindparam("b_id"), runs.c.outcome == RUNNING)
        .values(outcome="abandoned", finished_at=now, error_message=bindparam("message")),
        [{"b_id": r.id, "message": messages[r.id]} for r in gone],
    )
    kept = {row["b_id"] for row in refused}
    gone = [r for r in gone if r.id not in kept]
    _summarise(
        connection,
        [(r.job_name, r.id, "abandoned", r.started_at, now, messages[r.id]) for r in gone],
        fence=True,
    )
    return gone


def append_chunks(connection: Connection, chunks: Sequence[Chunk]) -> None:
    """Insert rows of lines: one prepared statement, plain tuples to the driver."""
    if not chunks:
        return
    connection.exec_driver_sql(_INSERT[database(connection).marker], list(chunks))


_COLUMNS = 'run_logs (run_id, seq, lines, "offset", body)'
_INSERT = {mark: f"INSERT INTO {_COLUMNS} VALUES ({', '.join([mark] * 5)})" for mark in ("?", "%s")}


def trim_lines(connection: Connection, run_id: str, *, above: int, below: int) -> None:
    """Delete ``run_id``'s rows first numbered strictly between ``above`` and ``below`` (the
    caller writes its lines from ``below`` on again)."""
    connection.execute(
        delete(run_logs).where(
            run_logs.c.run_id == run_id, run_logs.c.seq > above, run_logs.c.seq < below
        )
    )


_SUMMARY = ("b_job", "b_run", "b_outcome", "b_started", "b_finished", "b_error")


def _summarise(
    connection: Connection,
    summaries: list[tuple[Any, ...]],
    *,
    fence: bool = False,
    isolate: bool = True,
) -> None:
    """Write each job's last-run summary and free its lease when the run held it; ``fence``
    advances the fencing token too, so an abandoned run can no longer write."""
    # One row a job in PostgreSQL's JSON form: a job twice in a batch (runs that overlap)
    # must have its summaries applied in order, one statement each.
    items = [dict(zip(_SUMMARY, summary, strict=True)) for summary in summaries]
    once = len({item["b_job"] for item in items}) == len(items)
    refused = execute_batch(
        connection,
        f"summarise:{fence}",
        lambda value: _summary(fence, value),
        items,
        isolate=isolate or not once,
    )
    for row in refused:
        _log.error(
            "job %s: its schedule row refused the summary of run %s; the run is recorded, "
            "the job's last-run columns are not",
            row["b_job"],
            row["b_run"],
        )


def _own_running(db: Database) -> Any:
    query = select(runs.c.id).where(
        runs.c.id.in_(bindparam("ids", expanding=True)),
        runs.c.host_id == bindparam("host"),
        runs.c.outcome == RUNNING,
    )
    return db.locked(query)


def _finish_own_runs(_db: Database) -> Any:
    return (
        from_json(_finish_runs)
        .where(runs.c.host_id == bindparam("host"), runs.c.outcome == RUNNING)
        .returning(runs.c.id)
    )


def _finish_runs(value: BatchValue) -> Any:
    return (
        update(runs)
        .where(runs.c.id == value("b_id", runs.c.id.type))
        .values(
            outcome=value("outcome", runs.c.outcome.type),
            started_at=func.coalesce(
                value("started_at", runs.c.started_at.type), runs.c.started_at
            ),
            finished_at=value("finished_at", runs.c.finished_at.type),
            lease_expires_at=None,
            error_type=value("error_type", runs.c.error_type.type),
            error_message=value("error_message", runs.c.error_message.type),
            trace_id=value("trace_id", runs.c.trace_id.type),
            result=value("result", runs.c.result.type),
        )
    )


def _summary(fence: bool, value: BatchValue) -> Any:
    run = value("b_run", runs.c.id.type)
    outcome = value("b_outcome", schedules.c.last_outcome.type)
    finished = value("b_finished", schedules.c.last_finished_at.type)
    held = schedules.c.lease_run_id == run
    values: dict[str, Any] = {
        "last_run_id": run,
        "last_outcome": outcome,
        "last_started_at": value("b_started", schedules.c.last_started_at.type),
        "last_finished_at": finished,
        "last_error": value("b_error", schedules.c.last_error.type),
        "last_success_at": case(
            (outcome == "succeeded", finished),
            else_=schedules.c.last_success_at,
        ),
        "lease_owner": case((held, None), else_=schedules.c.lease_owner),
        "lease_expires_at": case((held, None), else_=schedules.c.lease_expires_at),
        "lease_run_id": case((held, None), else_=schedules.c.lease_run_id),
        "due_at": case(
            (
                schedules.c.paused.is_(False) & (schedules.c.next_occurrence < schedules.c.due_at),
                schedules.c.next_occurrence,
            ),
            else_=schedules.c.due_at,
        ),
    }
    if fence:
        values["fencing_token"] = schedules.c.fencing_token + 1
    job = value("b_job", schedules.c.job_name.type)
    return update(schedules).where(schedules.c.job_name == job).values(**values)


def _abandoned_message(run: RunRecord) -> str:
    expiry = (
        f"{run.lease_expires_at:%Y-%m-%dT%H:%M:%SZ}"
        if run.lease_expires_at is not None
        else "an unreadable time"
    )
    return f"lease expired at {expiry}: host {run.host_id} stopped renewing it"


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


# Durable per-job state behind ``JobContext.state``: a run writes only while it holds its lease
# (else ``StaleLeaseError``); a newer run does not fence an older live one (``overlap = "allow"``).


def schedule_token(connection: Connection, job_name: str) -> int | None:
    """The job's fencing token (None: no row), the row held so a claim taking the lease waits
    for this write (SQLite's write lock holds the whole file)."""
    query = select(schedules.c.fencing_token).where(schedules.c.job_name == job_name)
    current = connection.execute(query.with_for_update()).scalar()
    return None if current is None else int(current)


def get_value(connection: Connection, job_name: str, key: str) -> str | None:
    value = connection.execute(
        select(job_state.c.value).where(job_state.c.job_name == job_name, job_state.c.key == key)
    ).scalar()
    return None if value is None else str(value)


def put_value(
    connection: Connection, job_name: str, key: str, value: str, *, token: int, now: datetime
) -> None:
    """Write one key of a job's state, once its fence has been checked."""
    row = {"job_name": job_name, "key": key, "value": value, "fencing_token": token}
    written = insert_returning_new(
        connection, job_state, [{**row, "updated_at": now}], ["job_name", "key"]
    )
    if not written:
        connection.execute(
            update(job_state)
            .where(job_state.c.job_name == job_name, job_state.c.key == key)
            .values(value=value, fencing_token=token, updated_at=now)
        )


def delete_value(connection: Connection, job_name: str, key: str) -> bool:
    """Remove one key of a job's state, once its fence has been checked; whether it was there."""
    deleted = connection.execute(
        delete(job_state).where(job_state.c.job_name == job_name, job_state.c.key == key)
    )
    return bool(deleted.rowcount)


class StoreJobState:
    """The :class:`jobhost_contracts.JobState` of one run. With ``run_id`` and ``host_id`` every
    write checks that run's lease at ``store_time()``; without, the job's schedule token fences."""

    def __init__(
        self,
        engine: Engine,
        job_name: str,
        fencing_token: int,
        clock: Callable[[], datetime],
        run_id: str | None = None,
        *,
        host_id: str | None = None,
        store_time: Callable[[], datetime] | None = None,
    ) -> None:
        self._engine = engine
        self._job = job_name
        self._token = fencing_token
        self._clock = clock
        self._run_id = run_id
        self._host_id = host_id
        # Leases are stamped with the database's time on PostgreSQL; compare with the same.
        self._store_time: Callable[[Connection], datetime] = (
            (lambda _connection: store_time())
            if store_time is not None
            else (lambda connection: database_now(connection, clock))
        )

    def get(self, key: str) -> str | None:
        with reading(self._engine) as connection:
            return get_value(connection, self._job, key)

    def set(self, key: str, value: str) -> None:
        with self._engine.begin() as connection:
            self._check_fence(connection)
            put_value(connection, self._job, key, value, token=self._token, now=self._clock())

    def record(self, idempotency_key: str) -> bool:
        with self._engine.begin() as connection:
            self._check_fence(connection)
            inserted = insert_returning_new(
                connection,
                job_idempotency,
                [
                    {
                        "job_name": self._job,
                        "key": idempotency_key,
                        "run_id": self._run_id,
                        "fencing_token": self._token,
                        "recorded_at": self._clock(),
                    }
                ],
                ["job_name", "key"],
            )
        return bool(inserted)

    def seen(self, idempotency_key: str) -> bool:
        with reading(self._engine) as connection:
            found = connection.execute(
                select(job_idempotency.c.key).where(
                    job_idempotency.c.job_name == self._job,
                    job_idempotency.c.key == idempotency_key,
                )
            ).first()
        return found is not None

    def _check_fence(self, connection: Connection) -> None:
        if self._run_id is not None and self._host_id is not None:
            self._check_run_lease(connection, self._run_id, self._host_id)
            return
        current = schedule_token(connection, self._job)
        if current is not None and current > self._token:
            raise StaleLeaseError(self._job, self._token, current)

    def _check_run_lease(self, connection: Connection, run_id: str, host_id: str) -> None:
        # FOR UPDATE: recording the run abandoned waits for this write, so the write lands
        # before the verdict or sees it.
        query = select(
            runs.c.outcome, runs.c.host_id, runs.c.lease_expires_at, runs.c.fencing_token
        ).where(runs.c.id == run_id)
        row = connection.execute(query.with_for_update()).first()
        now = self._store_time(connection)
        if row is None:
            reason = "the run is not in the ledger"
        elif row.outcome != RUNNING:
            reason = f"the run was recorded {row.outcome}"
        elif row.host_id != host_id or row.fencing_token != self._token:
            reason = f"the run is held by host {row.host_id} with token {row.fencing_token}"
        elif row.lease_expires_at is None or row.lease_expires_at < now:
            reason = "its lease expired"
        else:
            return
        current = connection.execute(
            select(schedules.c.fencing_token).where(schedules.c.job_name == self._job)
        ).scalar()
        token = self._token if current is None else int(current)
        raise StaleLeaseError(self._job, self._token, token, run_id=run_id, reason=reason)
