"""Claiming a backfill's occurrences: the lowest priority of the claim, in the claim's transaction.

A host's turn calls :func:`claim_backfills` after :func:`~jobhost.store.claims.claim_work`, in
the same transaction, with the slots that are still free: scheduled occurrences, retries and
manual requests have had theirs first. Each running backfill (its row locked, ``SKIP LOCKED`` on
PostgreSQL, so one replica at a time counts its runs in flight) gets at most ``concurrency``
runs at once; its job's schedule row is locked as any claim locks it, the overlap policy and the
job's concurrency group are asked, and a paused job's backfill waits. A backfill's run is the
next attempt of its occurrence (highest attempt + 1, under the unique key (job, occurrence,
attempt)); the item is marked claimed in the transaction that inserts the run, so an item runs
once per backfill whatever the number of replicas. A run the database refuses leaves its item
pending for the next turn.

An item settles from its runs' final outcome (a retry carries the backfill id): succeeded once
one succeeded; failed once none is pending or running any more. A backfill is done when no item
is pending or claimed; a cancelled one claims nothing more and ends when its runs in flight end.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.engine import Connection

from jobhost.store._sql import insert_returning_new, locked
from jobhost.store.claims import Claim, ClaimRules, new_run_id, occurrence_key, schedule_problem
from jobhost.store.groups import GroupGate
from jobhost.store.records import PENDING, RUNNING, ScheduleRecord
from jobhost.store.schema import backfill_items, backfills, runs, schedules

__all__ = [
    "BackfillClaims",
    "backfill_key",
    "claim_backfills",
    "open_backfills",
    "settle_backfills",
]

_RUN_COLUMNS = ("job_name", "occurrence", "attempt")


@dataclass
class BackfillClaims:
    """What one call of :func:`claim_backfills` did."""

    claims: list[Claim] = field(default_factory=list)
    open: list[str] = field(default_factory=list)
    """Backfills not finished yet (running, or cancelled with runs in flight): settle them."""


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
    them). Settling is :func:`settle_backfills`' work, in a transaction of its own."""
    done = BackfillClaims()
    done.open = open_backfills(connection, only)
    if not done.open or slots <= 0:
        return done
    query = select(backfills).where(backfills.c.state == "running")
    if only is not None:
        query = query.where(backfills.c.id == only)
    rows = connection.execute(locked(connection, query.order_by(backfills.c.created_at)))
    gate = GroupGate(connection, now)
    for backfill in rows.mappings().all():
        if len(done.claims) >= slots:
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
    return done


def settle_backfills(connection: Connection, now: datetime, ids: Collection[str]) -> None:
    """Settle the claimed items of backfills ``ids`` whose runs ended; end what is finished.

    Its own short transaction: it takes no lock a claim waits on while holding another.
    """
    if not ids:
        return
    mine = backfill_items.c.backfill_id.in_(list(ids))
    item_runs = and_(
        runs.c.backfill_id == backfill_items.c.backfill_id,
        runs.c.occurrence == backfill_items.c.occurrence,
    )
    claimed = and_(mine, backfill_items.c.state == "claimed")
    connection.execute(
        update(backfill_items)
        .where(claimed, exists().where(item_runs, runs.c.outcome == "succeeded"))
        .values(state="succeeded")
    )
    connection.execute(
        update(backfill_items)
        .where(claimed, ~exists().where(item_runs, runs.c.outcome.in_((PENDING, RUNNING))))
        .values(state="failed")
    )
    items_of = backfill_items.c.backfill_id == backfills.c.id
    connection.execute(
        update(backfills)
        .where(
            backfills.c.id.in_(list(ids)),
            backfills.c.state == "running",
            ~exists().where(items_of, backfill_items.c.state.in_(("pending", "claimed"))),
        )
        .values(state="done", finished_at=now)
    )
    connection.execute(
        update(backfills)
        .where(
            backfills.c.id.in_(list(ids)),
            backfills.c.state == "cancelled",
            backfills.c.finished_at.is_(None),
            ~exists().where(items_of, backfill_items.c.state == "claimed"),
        )
        .values(finished_at=now)
    )


def backfill_key(job_name: str, occurrence: datetime, mode: str, backfill_id: str) -> str:
    """The idempotency key of a backfill's run: the occurrence's own key in modes ``missing``
    and ``failed`` (the target never saw it succeed), one of the backfill's own in mode ``all``
    (a deliberate replay is not dropped by a target that deduplicates)."""
    key = occurrence_key(job_name, occurrence)
    return f"{key}:backfill:{backfill_id}" if mode == "all" else key


# -- one backfill ------------------------------------------------------------------------------


def open_backfills(connection: Connection, only: str | None = None) -> list[str]:
    """Backfills not finished: running, or cancelled with runs in flight."""
    return list(connection.execute(select(backfills.c.id).where(_open(only))).scalars())


def _open(only: str | None) -> Any:
    clause = (backfills.c.state == "running") | (
        (backfills.c.state == "cancelled") & backfills.c.finished_at.is_(None)
    )
    return clause & (backfills.c.id == only) if only is not None else clause


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
    name = str(backfill["job_name"])
    found = connection.execute(
        locked(connection, select(schedules).where(schedules.c.job_name == name))
    ).mappings()
    first = found.first()
    if first is None:
        return []
    row = ScheduleRecord.from_row(first)
    if row.paused or schedule_problem(row) is not None:
        return []  # a paused job's backfill waits; a corrupt row is reported by the claim
    in_flight = connection.execute(
        select(func.count()).where(
            backfill_items.c.backfill_id == backfill["id"], backfill_items.c.state == "claimed"
        )
    ).scalar_one()
    room = min(int(backfill["concurrency"]) - int(in_flight), slots)
    starter = _Starter(
        connection, row, host_id=host_id, now=now, rules=rules, gate=gate, backfill=backfill
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
    ) -> None:
        self._connection = connection
        self._row = row
        self._host = host_id
        self._now = now
        self._rules = rules
        self._gate = gate
        self._backfill = backfill
        self._name = row.job_name
        self._token = row.fencing_token
        self._lease_live = row.lease_live(now)
        self._live = 0
        if rules.counts_live_runs(self._name):
            self._live = int(
                connection.execute(
                    select(func.count()).where(
                        runs.c.job_name == self._name,
                        runs.c.outcome == RUNNING,
                        runs.c.lease_expires_at >= now,
                    )
                ).scalar_one()
            )
        self._new: list[dict[str, Any]] = []
        self._retried: list[Claim] = []
        self._claims: list[Claim] = []

    def items(self, room: int) -> None:
        query = (
            select(backfill_items.c.occurrence)
            .where(
                backfill_items.c.backfill_id == self._backfill["id"],
                backfill_items.c.state == "pending",
            )
            .order_by(backfill_items.c.occurrence)
            .limit(room)
        )
        chosen = list(self._connection.execute(locked(self._connection, query)).scalars())
        if not chosen:
            return
        last = dict(
            self._connection.execute(
                select(runs.c.occurrence, func.max(runs.c.attempt))
                .where(runs.c.job_name == self._name, runs.c.occurrence.in_(chosen))
                .group_by(runs.c.occurrence)
            ).all()
        )
        mode = str(self._backfill["mode"])
        for occurrence in chosen:
            if not self._admit():
                return
            claim = self._claim(
                occurrence,
                int(last.get(occurrence) or 0) + 1,
                "backfill",
                backfill_key(self._name, occurrence, mode, str(self._backfill["id"])),
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
                    "backfill_id": self._backfill["id"],
                }
            )

    def retries(self, room: int) -> None:
        query = (
            select(runs)
            .where(
                runs.c.backfill_id == self._backfill["id"],
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
        for claim in fresh:
            connection.execute(
                update(backfill_items)
                .where(
                    backfill_items.c.backfill_id == self._backfill["id"],
                    backfill_items.c.occurrence == claim.occurrence,
                    backfill_items.c.state == "pending",
                )
                .values(state="claimed", run_id=claim.run_id)
            )
        if taken:
            # As in every claim: the token only grows; the newest run holds the job's lease.
            connection.execute(
                update(schedules)
                .where(schedules.c.job_name == self._name)
                .values(
                    fencing_token=self._token,
                    lease_owner=self._host,
                    lease_expires_at=taken[-1].lease_until,
                    lease_run_id=taken[-1].run_id,
                )
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
    ) -> Claim:
        self._token += 1
        self._live += 1
        self._lease_live = True
        claim = Claim(
            run_id=run_id or new_run_id(),
            job_name=self._name,
            occurrence=occurrence,
            attempt=attempt,
            source=source,
            fencing_token=self._token,
            idempotency_key=key,
            started_at=self._now,
            requested_by=str(self._backfill["actor"]),
            reason=self._backfill["reason"],
            lease_until=self._now + self._rules.lease(self._name),
            backfill_id=str(self._backfill["id"]),
        )
        self._claims.append(claim)
        return claim
