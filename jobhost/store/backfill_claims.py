"""Claiming a backfill's occurrences: the lowest priority, in a transaction of its own.

A host's turn claims backfilled occurrences with :func:`claim_backfills` after its scheduled
claim has committed, with the slots that are still free: scheduled occurrences, retries and
manual requests have had theirs first, and the schedule rows they locked are already released.
One statement reads the running backfills with room (fewer items claimed than their
``concurrency``) together with their job's schedule row (both locked, ``SKIP LOCKED`` on
PostgreSQL, so one replica at a time counts a backfill's runs in flight) and its live runs; a
paused job's backfill waits. For each, one statement locks the next pending items with their
highest attempt so far, one inserts their runs (a backfill's run is the next attempt of its
occurrence, under the unique key (job, occurrence, attempt), with the attempts before it as its
``attempt_base``: its retry budget is its own), one marks the items claimed, and one moves the
job's fencing token, as any claim does. An item is marked claimed in the transaction that
inserts its run, so it runs once per backfill whatever the number of replicas; a run the
database refuses leaves its item pending for the next turn.

A backfill yields to the schedule, never the other way round: it starts a run only when the
job's overlap policy allows one beside the job's own live runs (scheduled, manual, retried),
and up to its ``concurrency`` beside each other; its runs do not take the job's lease, so the
overlap rule of the job's scheduled occurrences never counts them. The job's concurrency group
is asked as for any run.

Items settle as their runs' outcomes are written (:mod:`jobhost.store.backfill_settling`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Connection

from jobhost.store._sql import built, insert_returning_new, locked
from jobhost.store.claims import Claim, ClaimRules, new_run_id, occurrence_key, schedule_problem
from jobhost.store.groups import GroupGate
from jobhost.store.records import PENDING, RUNNING, ScheduleRecord
from jobhost.store.schema import backfill_items, backfills, runs, schedules

__all__ = [
    "BackfillClaims",
    "backfill_key",
    "claim_backfills",
]

_RUN_COLUMNS = ("job_name", "occurrence", "attempt")


@dataclass
class BackfillClaims:
    """What one call of :func:`claim_backfills` did."""

    claims: list[Claim] = field(default_factory=list)
    more: bool = False
    """A backfill may have more to claim than the slots allowed: look again next turn."""


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
    done = BackfillClaims()
    if slots <= 0:
        return done
    if only is None:
        query = built(connection, "open-backfills", lambda d: _backfills_query(d, one=False))
    else:
        query = built(connection, "one-backfill", lambda d: _backfills_query(d, one=True))
    found = connection.execute(query, {"now": now, "only": only})
    gate = GroupGate(connection, now)
    for backfill in found.mappings().all():
        if len(done.claims) >= slots:
            done.more = True
            break
        name = str(backfill["job_name"])
        if name in skip or not rules.knows(name):
            continue
        done.claims += _claim_one(
            connection,
            dict(backfill),
            host_id=host_id,
            now=now,
            slots=slots - len(done.claims),
            rules=rules,
            gate=gate,
            only=only,
        )
    done.more |= len(done.claims) >= slots
    return done


def backfill_key(job_name: str, occurrence: datetime, mode: str, backfill_id: str) -> str:
    """The idempotency key of a backfill's run: the occurrence's own key in modes ``missing``
    and ``failed`` (the target never saw it succeed), one of the backfill's own in mode ``all``
    (a deliberate replay is not dropped by a target that deduplicates)."""
    key = occurrence_key(job_name, occurrence)
    return f"{key}:backfill:{backfill_id}" if mode == "all" else key


# -- one backfill ------------------------------------------------------------------------------


def _claim_one(
    connection: Connection,
    backfill: dict[str, Any],
    *,
    host_id: str,
    now: datetime,
    slots: int,
    rules: ClaimRules,
    gate: GroupGate,
    only: str | None,
) -> list[Claim]:
    row = ScheduleRecord.from_row(backfill)
    if schedule_problem(row) is not None:
        return []  # a corrupt row is reported by the claim
    room = min(int(backfill["backfill_concurrency"]) - int(backfill["in_flight"]), slots)
    starter = _Starter(
        connection,
        row,
        host_id=host_id,
        now=now,
        rules=rules,
        gate=gate,
        backfill=backfill,
        live=int(backfill["live"]),
    )
    if only is not None:
        # Retries of this backfill's runs hold their item's slot: they go first.
        starter.retries(slots)
    if room > 0:
        starter.items(room)
    return starter.write()


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
        backfill: dict[str, Any],
        live: int,
    ) -> None:
        self._connection = connection
        self._row = row
        self._host = host_id
        self._now = now
        self._rules = rules
        self._gate = gate
        self._id = str(backfill["backfill_id"])
        self._mode = str(backfill["backfill_mode"])
        self._actor = str(backfill["backfill_actor"])
        self._reason = backfill["backfill_reason"]
        self._name = row.job_name
        self._token = row.fencing_token
        self._lease_live = row.lease_live(now)
        self._live = live
        self._new: list[dict[str, Any]] = []
        self._retried: list[Claim] = []
        self._claims: list[Claim] = []

    def items(self, room: int) -> None:
        query = built(self._connection, "backfill-items", _pending_items)
        chosen = self._connection.execute(
            query, {"backfill": self._id, "job": self._name, "room": room}
        ).all()
        for occurrence, last in chosen:
            if not self._admit():
                return
            claim = self._claim(
                occurrence,
                int(last or 0) + 1,
                "backfill",
                backfill_key(self._name, occurrence, self._mode, self._id),
                attempt_base=int(last or 0),
            )
            self._new.append(
                {
                    "id": claim.run_id,
                    "job_name": self._name,
                    "occurrence": occurrence,
                    "attempt": claim.attempt,
                    "source": "backfill",
                    "outcome": RUNNING,
                    "host_id": self._host,
                    "fencing_token": claim.fencing_token,
                    "idempotency_key": claim.idempotency_key,
                    "requested_by": claim.requested_by,
                    "reason": claim.reason,
                    "queued_at": self._now,
                    "started_at": self._now,
                    "lease_expires_at": claim.lease_until,
                    "backfill_id": self._id,
                    "attempt_base": claim.attempt_base,
                }
            )

    def retries(self, room: int) -> None:
        query = (
            select(runs)
            .where(
                runs.c.backfill_id == self._id,
                runs.c.outcome == PENDING,
                runs.c.not_before <= self._now,
            )
            .order_by(runs.c.not_before)
            .limit(room)
        )
        for found in self._connection.execute(locked(self._connection, query)).mappings().all():
            if not self._admit():
                return
            claim = self._claim(
                found["occurrence"],
                int(found["attempt"]),
                str(found["source"]),
                str(found["idempotency_key"]),
                run_id=str(found["id"]),
                attempt_base=int(found["attempt_base"]),
            )
            self._retried.append(claim)

    def write(self) -> list[Claim]:
        connection = self._connection
        inserted = set(insert_returning_new(connection, runs, self._new, _RUN_COLUMNS))
        for claim in self._retried:
            started = connection.execute(
                update(runs)
                .where(runs.c.id == claim.run_id, runs.c.outcome == PENDING)
                .values(
                    outcome=RUNNING,
                    host_id=self._host,
                    fencing_token=claim.fencing_token,
                    started_at=self._now,
                    lease_expires_at=claim.lease_until,
                )
            )
            if started.rowcount:
                inserted.add(claim.run_id)
        taken = [c for c in self._claims if c.run_id in inserted]
        new_ids = {r["id"] for r in self._new}
        fresh = [c for c in taken if c.run_id in new_ids]
        if fresh:
            connection.execute(
                built(connection, "claim-items", _claim_items),
                [
                    {"b_backfill": self._id, "b_occurrence": c.occurrence, "b_run": c.run_id}
                    for c in fresh
                ],
            )
        if taken:
            # As in every claim the token only grows; the job's lease stays with its own runs
            # (each run is fenced by its own row), so a backfill never makes a scheduled
            # occurrence overlap.
            connection.execute(
                update(schedules)
                .where(schedules.c.job_name == self._name)
                .values(fencing_token=self._token)
            )
        return taken

    def _admit(self) -> bool:
        if not self._rules.may_start(self._name, self._live, self._lease_live):
            return False
        # Behind every occurrence of the group that waits: a backfill never makes one late.
        return self._row.concurrency_group is None or self._gate.admit(self._row, queue_order=True)

    def _claim(
        self,
        occurrence: datetime,
        attempt: int,
        source: str,
        key: str,
        *,
        run_id: str | None = None,
        attempt_base: int = 0,
    ) -> Claim:
        # The backfill's own runs do not count against the overlap rule: its concurrency
        # bounds them.
        self._token += 1
        claim = Claim(
            run_id=run_id or new_run_id(),
            job_name=self._name,
            occurrence=occurrence,
            attempt=attempt,
            source=source,
            fencing_token=self._token,
            idempotency_key=key,
            started_at=self._now,
            requested_by=self._actor,
            reason=self._reason,
            lease_until=self._now + self._rules.lease(self._name),
            backfill_id=self._id,
            attempt_base=attempt_base,
        )
        self._claims.append(claim)
        return claim


# -- the statements, built once ----------------------------------------------------------------


def _backfills_query(dialect: str, *, one: bool) -> Any:
    """Running backfills of jobs not paused, oldest first, each with its job's schedule row, its
    items in flight (``in_flight``) and its job's own live runs, outside any backfill
    (``live``), locked together."""
    in_flight = (
        select(func.count())
        .where(backfill_items.c.backfill_id == backfills.c.id, backfill_items.c.state == "claimed")
        .scalar_subquery()
    )
    live = (
        select(func.count())
        .where(
            runs.c.job_name == backfills.c.job_name,
            runs.c.outcome == RUNNING,
            runs.c.backfill_id.is_(None),
            runs.c.lease_expires_at >= bindparam("now", type_=runs.c.lease_expires_at.type),
        )
        .scalar_subquery()
    )
    query = (
        select(
            backfills.c.id.label("backfill_id"),
            backfills.c.mode.label("backfill_mode"),
            backfills.c.actor.label("backfill_actor"),
            backfills.c.reason.label("backfill_reason"),
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
        # Its retries hold their items' slots and go first: read it even when it is full.
        query = query.where(backfills.c.id == bindparam("only"))
    else:
        query = query.where(backfills.c.concurrency > in_flight)
    if dialect == "postgresql":
        query = query.with_for_update(skip_locked=True, of=[backfills, schedules])
    return query


def _pending_items(dialect: str) -> Any:
    """The backfill's next pending items, oldest first, each with its highest attempt so far."""
    last = (
        select(func.max(runs.c.attempt))
        .where(
            runs.c.job_name == bindparam("job"), runs.c.occurrence == backfill_items.c.occurrence
        )
        .scalar_subquery()
    )
    query = (
        select(backfill_items.c.occurrence, last)
        .where(
            backfill_items.c.backfill_id == bindparam("backfill"),
            backfill_items.c.state == "pending",
        )
        .order_by(backfill_items.c.occurrence)
        .limit(bindparam("room"))
    )
    if dialect == "postgresql":
        query = query.with_for_update(skip_locked=True, of=backfill_items)
    return query


def _claim_items(_dialect: str) -> Any:
    return (
        update(backfill_items)
        .where(
            backfill_items.c.backfill_id == bindparam("b_backfill"),
            backfill_items.c.occurrence == bindparam("b_occurrence"),
            backfill_items.c.state == "pending",
        )
        .values(state="claimed", run_id=bindparam("b_run"))
    )
