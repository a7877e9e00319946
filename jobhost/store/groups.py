"""Concurrency groups in the claim: at most N runs of a group at once, across every replica.

A group's slots are held by its jobs' running runs whose lease has not expired, so a slot
frees when its run ends or when the lease of a dead host's run runs out. The claim asks a
:class:`GroupGate` before it starts any run of a job in a group; the gate counts inside the
claim's own transaction, under a lock on the groups' rows (PostgreSQL: ``FOR UPDATE``, taken
once per claim and in name order, so two claims never wait on each other in a circle; SQLite:
the claim's transaction already holds the database), so two replicas never both take the last
slot.

What finds its group full waits rather than being dropped: a due schedule row keeps its
occurrence and is looked at again after :data:`RECHECK` (``group_waiting_since`` says since
when it waits); a retry or a queued manual run stays pending with ``not_before`` moved on. A
free slot goes to the group's oldest waiting occurrence first: a younger occurrence is let in
only while more slots are free than older occurrences wait for them, so no job of a busy group
starves. A waiting row nobody has looked at for :data:`STALE` (its job is known to no live
host) stops holding its place.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, RUNNING, PlannedRow, RunRecord
from jobhost.store.schema import concurrency_groups, runs, schedules

__all__ = ["RECHECK", "STALE", "GroupGate"]

RECHECK = timedelta(seconds=1)
"""How soon something waiting for a slot is looked at again."""

STALE = timedelta(seconds=5)
"""A waiting row not looked at for this long no longer holds its place in the queue."""


@dataclass
class _Group:
    slots: int
    running: int
    waiting: list[tuple[datetime, str]] = field(default_factory=list)
    """(occurrence, job) of the oldest waiting schedule rows, oldest first."""

    def ahead_of(self, job_name: str, occurrence: datetime) -> int:
        return sum(1 for when, name in self.waiting if (when, name) < (occurrence, job_name))

    def busy(self, name: str) -> str:
        return f"waiting for group {name}, {self.running} of {self.slots} busy"


class GroupGate:
    """The slots of every concurrency group, as one claim transaction sees and takes them."""

    def __init__(self, connection: Connection, now: datetime) -> None:
        self._connection = connection
        self._now = now
        self._limits: dict[str, int] | None = None
        self._groups: dict[str, _Group] = {}
        self._parked_rows: dict[str, datetime] = {}
        self._cleared_rows: list[str] = []
        self._parked_runs: list[dict[str, Any]] = []
        self._cleared_runs: list[str] = []
        self.waits: Counter[str] = Counter()
        """Group → things that began waiting in this claim (the waits counter)."""

    def admit(self, row: PlannedRow, *, queue_order: bool) -> bool:
        """Take a slot of the job's group for one run; False when the group is full.

        ``queue_order`` makes a scheduled occurrence wait behind older waiting occurrences of
        the group; retries and manual runs take any free slot.
        """
        group = self._group(row.concurrency_group)
        if group is None:
            return True
        ahead = 0
        if queue_order and row.next_occurrence is not None:
            ahead = group.ahead_of(row.job_name, row.next_occurrence)
        if group.slots - group.running - ahead <= 0:
            return False
        group.running += 1
        group.waiting = [w for w in group.waiting if w[1] != row.job_name]
        return True

    def beside(self, row: PlannedRow) -> str | None:
        """Take a slot even in a full group (``trigger --now``); the note the run records."""
        group = self._group(row.concurrency_group)
        if group is None:
            return None
        full = group.running >= group.slots
        note = (
            f"--now: started beside the limit of group {row.concurrency_group} "
            f"({group.running} of {group.slots} busy)"
        )
        group.running += 1
        return note if full else None

    def waiting_message(self, row: PlannedRow) -> str:
        name = row.concurrency_group or ""
        group = self._group(name)
        return group.busy(name) if group is not None else f"waiting for group {name}"

    def park_row(self, row: PlannedRow) -> None:
        """The row's occurrence waits: look at it again after :data:`RECHECK`."""
        if row.group_waiting_since is None:
            self.waits[row.concurrency_group or ""] += 1
        self._parked_rows[row.job_name] = row.group_waiting_since or self._now

    def settled_row(self, row: PlannedRow) -> None:
        """The row was acted on (run, recorded or moved on): it no longer waits."""
        if row.group_waiting_since is not None and row.job_name not in self._parked_rows:
            self._cleared_rows.append(row.job_name)

    def park_run(self, run: RunRecord, group: str | None) -> None:
        """A pending run waits for its group: claimable again after :data:`RECHECK`."""
        if run.group_waiting_since is None:
            self.waits[group or ""] += 1
        self._parked_runs.append(
            {
                "b_id": run.id,
                "not_before": self._now + RECHECK,
                "since": run.group_waiting_since or self._now,
            }
        )

    def started_run(self, run: RunRecord) -> None:
        if run.group_waiting_since is not None:
            self._cleared_runs.append(run.id)

    def write(self) -> None:
        """What the gate decided, in a statement per kind of change (none without groups)."""
        connection = self._connection
        if self._parked_rows:
            connection.execute(
                update(schedules)
                .where(schedules.c.job_name == bindparam("b_job"))
                .values(due_at=bindparam("due_at"), group_waiting_since=bindparam("since")),
                [
                    {"b_job": name, "due_at": self._now + RECHECK, "since": since}
                    for name, since in self._parked_rows.items()
                ],
            )
        if self._cleared_rows:
            connection.execute(
                update(schedules)
                .where(schedules.c.job_name.in_(self._cleared_rows))
                .values(group_waiting_since=None)
            )
        if self._parked_runs:
            connection.execute(
                update(runs)
                .where(runs.c.id == bindparam("b_id"), runs.c.outcome == PENDING)
                .values(
                    not_before=bindparam("not_before"),
                    group_waiting_since=bindparam("since"),
                ),
                self._parked_runs,
            )
        if self._cleared_runs:
            connection.execute(
                update(runs)
                .where(runs.c.id.in_(self._cleared_runs))
                .values(group_waiting_since=None)
            )

    # -- reading the groups ------------------------------------------------------------------

    def _group(self, name: str | None) -> _Group | None:
        if name is None:
            return None
        group = self._groups.get(name)
        if group is not None:
            return group
        limits = self._lock_limits()
        if name not in limits:
            return None  # no limit stored (a catalog older than the group): not limited
        group = self._groups[name] = _Group(
            slots=limits[name], running=self._running(name), waiting=self._waiting(name)
        )
        return group

    def _lock_limits(self) -> dict[str, int]:
        if self._limits is None:
            query = select(concurrency_groups.c.name, concurrency_groups.c.slots).order_by(
                concurrency_groups.c.name
            )
            if self._connection.dialect.name == "postgresql":
                # Every group row, in name order, once per claim: waits never form a circle.
                query = query.with_for_update()
            self._limits = {str(n): int(s) for n, s in self._connection.execute(query)}
        return self._limits

    def _running(self, name: str) -> int:
        query = (
            select(func.count())
            .select_from(runs.join(schedules, runs.c.job_name == schedules.c.job_name))
            .where(
                schedules.c.concurrency_group == name,
                runs.c.outcome == RUNNING,
                runs.c.lease_expires_at >= self._now,
            )
        )
        return int(self._connection.execute(query).scalar_one())

    def _waiting(self, name: str) -> list[tuple[datetime, str]]:
        limit = self._limits[name] if self._limits else 1
        query = (
            select(schedules.c.next_occurrence, schedules.c.job_name)
            .where(
                schedules.c.concurrency_group == name,
                schedules.c.group_waiting_since.is_not(None),
                schedules.c.next_occurrence.is_not(None),
                schedules.c.due_at >= self._now - STALE,
            )
            .order_by(schedules.c.next_occurrence, schedules.c.job_name)
            .limit(limit)
        )
        return [(when, str(job)) for when, job in self._connection.execute(query)]
