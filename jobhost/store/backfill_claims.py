"""Claiming a backfill's occurrences: the lowest priority, last step of the one claim.

A backfill's occurrences wait as pending runs of it (priority 2, see
:mod:`jobhost.store.backfills`). :func:`~jobhost.store.claims.claim_work` claims them with
:func:`claim_backfills`, in the same transaction, once it has written what it claimed of
pending runs and due schedules, with the workers still free: scheduled occurrences, retries and
manual runs have had theirs first. It reads the running backfills with room (fewer runs in
flight, or retries waiting, than their ``concurrency``) together with their job's schedule row (both
locked, ``SKIP LOCKED`` on PostgreSQL, so one replica at a time counts a backfill's runs) and
the job's own live runs; a paused job's backfill waits. For each, one statement locks its next
waiting occurrences, oldest first, one starts them, and one moves the job's fencing token, as
any claim does.

A backfill yields to the schedule, never the other way round: it starts a run only when the
job's overlap policy allows one beside the job's own live runs (scheduled, manual, retried),
and up to its ``concurrency`` beside each other; its runs do not take the job's lease, so the
overlap rule of the job's scheduled occurrences never counts them. The job's concurrency group
is asked as for any run. A retry of a backfill's run (priority 1) is an ordinary pending run
that any host's claim takes, also without the job's lease; a command running a backfill in its
own process (``only``) takes them itself.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select
from sqlalchemy.engine import Connection

from jobhost.records import (
    PENDING,
    PRIORITY_BACKFILL,
    PRIORITY_RETRY,
    RUNNING,
    Claim,
    ScheduleRecord,
)
from jobhost.store._sql import built
from jobhost.store.backfills import finish_backfills
from jobhost.store.claim_model import ClaimRules, schedule_problem
from jobhost.store.claim_writes import start_pending
from jobhost.store.groups import GroupGate
from jobhost.store.schema import backfills, runs, schedules

__all__ = ["BackfillClaims", "claim_backfills"]


@dataclass
class BackfillClaims:
    """What one call of :func:`claim_backfills` did."""

    claims: list[Claim] = field(default_factory=list)
    more: bool = False
    """A backfill may have more to claim than the slots allowed: look again next turn."""
    yielded: set[str] = field(default_factory=set)
    """Jobs whose backfill waits for one of the job's own runs (or its group): look again when
    one of them ends."""


def claim_backfills(
    connection: Connection,
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    skip: Collection[str] = (),
    only: str | None = None,
) -> BackfillClaims:
    """Claim up to ``slots`` runs of running backfills (``only``: of that backfill alone, with
    its due retries too: a command running a backfill in its own process has no host to take
    them)."""
    if only is not None:
        finish_backfills(connection, now, [only])
    done = BackfillClaims()
    if slots <= 0:
        return done
    if only is None:
        query = built(connection, "open-backfills", lambda d: _backfills_query(d, one=False))
    else:
        query = built(connection, "one-backfill", lambda d: _backfills_query(d, one=True))
    found = connection.execute(query, {"now": now, "only": only})
    gate = GroupGate(connection, now)
    idle: list[str] = []
    for backfill in found.mappings().all():
        if len(done.claims) >= slots:
            done.more = True
            break
        name = str(backfill["job_name"])
        if name in skip or not rules.knows(name):
            continue
        row = ScheduleRecord.from_row(backfill)
        if schedule_problem(row) is not None:
            continue  # a corrupt row is reported by the claim
        starter = _Starter(
            connection,
            row,
            host_id=host_id,
            now=now,
            rules=rules,
            gate=gate,
            live=int(backfill["live"]),
        )
        room = min(int(backfill["backfill_concurrency"]) - int(backfill["in_flight"]), slots)
        left = slots - len(done.claims)
        if only is not None:
            # Its retries hold their occurrences' slots: they go first.
            starter.start(str(backfill["backfill_id"]), left, retries=True)
        if room > 0:
            starter.start(str(backfill["backfill_id"]), min(room, left - starter.taken))
        if not (starter.taken or starter.yielded or int(backfill["in_flight"])):
            idle.append(str(backfill["backfill_id"]))
        done.claims += starter.write()
        if starter.yielded:
            done.yielded.add(name)
    if idle:
        # Its runs end with a write that finishes it; one whose last run left otherwise (by
        # retention, say) is finished here, or every turn would look at it again.
        finish_backfills(connection, now, idle)
    done.more |= len(done.claims) >= slots
    return done


class _Starter:
    """The runs one backfill starts in this claim, written together."""

    def __init__(
        self,
        connection: Connection,
        row: ScheduleRecord,
        *,
        host_id: str,
        now: datetime,
        rules: ClaimRules,
        gate: GroupGate,
        live: int,
    ) -> None:
        self._connection = connection
        self._row = row
        self._host = host_id
        self._now = now
        self._rules = rules
        self._gate = gate
        self._name = row.job_name
        self._token = row.fencing_token
        self._lease_live = row.lease_live(now)
        # The job's own live runs (outside any backfill): the overlap rule counts these.
        self._live = live
        self._claims: list[Claim] = []
        self.yielded = False
        """A waiting occurrence was left for the job's own runs (or its group's)."""

    @property
    def taken(self) -> int:
        return len(self._claims)

    def start(self, backfill_id: str, limit: int, *, retries: bool = False) -> None:
        """Start up to ``limit`` of the backfill's waiting occurrences, oldest first (with
        ``retries``, its retries whose backoff has passed)."""
        if limit <= 0:
            return
        name = "backfill-retries" if retries else "backfill-waiting"
        query = built(self._connection, name, lambda d: _waiting(d, retries=retries))
        found = self._connection.execute(
            query, {"backfill": backfill_id, "now": self._now, "limit": limit}
        ).mappings()
        for run in found.all():
            if not self._admit():
                self.yielded = True
                return
            self._claim(run, backfill_id)

    def write(self) -> list[Claim]:
        if not self._claims:
            return []
        start_pending(
            self._connection,
            [
                {
                    "b_id": c.run_id,
                    "host_id": self._host,
                    "fencing_token": c.fencing_token,
                    "started_at": self._now,
                    "lease_expires_at": c.lease_until,
                    "reason": c.reason,
                }
                for c in self._claims
            ],
        )
        # As in every claim the token only grows; the job's lease stays with its own runs
        # (each run is fenced by its own row), so a backfill never makes a scheduled
        # occurrence overlap.
        self._connection.execute(
            schedules.update()
            .where(schedules.c.job_name == self._name)
            .values(fencing_token=self._token)
        )
        return self._claims

    def _admit(self) -> bool:
        if not self._rules.may_start(self._name, self._live, self._lease_live):
            return False
        # Behind every occurrence of the group that waits: a backfill never makes one late.
        return self._row.concurrency_group is None or self._gate.admit(self._row, queue_order=True)

    def _claim(self, run: Any, backfill_id: str) -> None:
        # The backfill's own runs do not count against the overlap rule: its concurrency
        # bounds them.
        self._token += 1
        self._claims.append(
            Claim(
                run_id=str(run["id"]),
                job_name=self._name,
                occurrence=run["occurrence"],
                attempt=int(run["attempt"]),
                source=str(run["source"]),
                fencing_token=self._token,
                idempotency_key=str(run["idempotency_key"]),
                started_at=self._now,
                requested_by=run["requested_by"],
                reason=run["reason"],
                lease_until=self._now + self._rules.lease(self._name),
                backfill_id=backfill_id,
                attempt_base=int(run["attempt_base"]),
            )
        )


# -- the statements, built once ----------------------------------------------------------------


def _backfills_query(dialect: str, *, one: bool) -> Any:
    """Running backfills of jobs not paused, oldest first, each with its job's schedule row, its
    runs in flight or waiting to be retried (``in_flight``) and its job's own live runs, outside
    any backfill (``live``), locked together."""
    in_flight = (
        select(func.count())
        .where(
            runs.c.backfill_id == backfills.c.id,
            or_(
                runs.c.outcome == RUNNING,
                and_(runs.c.outcome == PENDING, runs.c.priority == PRIORITY_RETRY),
            ),
        )
        .scalar_subquery()
    )
    live = (
        select(func.count())
        .where(
            runs.c.job_name == backfills.c.job_name,
            runs.c.outcome == RUNNING,
            runs.c.lease_expires_at >= bindparam("now", type_=runs.c.lease_expires_at.type),
            runs.c.backfill_id.is_(None),
        )
        .scalar_subquery()
    )
    query = (
        select(
            backfills.c.id.label("backfill_id"),
            backfills.c.concurrency.label("backfill_concurrency"),
            in_flight.label("in_flight"),
            live.label("live"),
            schedules,
        )
        .join(schedules, schedules.c.job_name == backfills.c.job_name)
        .where(backfills.c.state == "running", schedules.c.paused.is_(False))
        .order_by(backfills.c.created_at)
    )
    if one:
        # Its retries hold their occurrences' slots and go first: read it even when it is full.
        query = query.where(backfills.c.id == bindparam("only"))
    else:
        query = query.where(backfills.c.concurrency > in_flight)
    if dialect == "postgresql":
        query = query.with_for_update(skip_locked=True, of=[backfills, schedules])
    return query


def _waiting(dialect: str, *, retries: bool) -> Any:
    """The backfill's next waiting occurrences, oldest first, through the index on (backfill_id,
    outcome, priority, occurrence); with ``retries``, its retries due."""
    query = select(
        runs.c.id,
        runs.c.occurrence,
        runs.c.attempt,
        runs.c.attempt_base,
        runs.c.source,
        runs.c.idempotency_key,
        runs.c.requested_by,
        runs.c.reason,
    ).where(runs.c.backfill_id == bindparam("backfill"), runs.c.outcome == PENDING)
    if retries:
        query = query.where(
            runs.c.priority == PRIORITY_RETRY,
            runs.c.not_before <= bindparam("now", type_=runs.c.not_before.type),
        )
    else:
        query = query.where(runs.c.priority == PRIORITY_BACKFILL)
    query = query.order_by(runs.c.occurrence).limit(bindparam("limit"))
    if dialect == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return query
