"""Keeping the store's schedules in step with the declared catalog, written when a host starts
(the newest start wins). A changed trigger recomputes the next occurrence from now; an unchanged
row keeps its phase unless its trigger would never produce it; a job no longer declared is
orphaned, never deleted. ``jobhost plan`` shows the same changes (:func:`diff_schedules`)
without making them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, bindparam, case, func, not_, or_, select, update
from sqlalchemy.engine import Connection

from jobhost.records import (
    DesiredSchedule,
    ScheduleRecord,
    SyncPlan,
    diff_schedules,
    trigger_changed,
)
from jobhost.store.engine import copy_ignoring_duplicates
from jobhost.store.reports import list_schedules
from jobhost.store.schema import schedules

__all__ = ["holds_version", "orphan_schedules", "sync_schedules"]

# A stored next occurrence further ahead than this is checked against its trigger when a host
# starts with the version the store already holds (no cron job is more than a leap year apart).
_FAR_AHEAD = timedelta(days=366 * 4 + 1)


def sync_schedules(
    connection: Connection,
    desired: Sequence[DesiredSchedule],
    now: datetime,
    *,
    catalog_version: str | None = None,
    prune: bool = True,
) -> SyncPlan:
    """Bring the schedules in line with ``desired`` (with ``prune`` false, only the rows it
    names); return what changed. Every update is conditional on the row still holding what was
    read, so replicas starting together never overwrite each other's progress.
    ``catalog_version`` is stamped on every row the catalog declares."""
    if (
        prune
        and catalog_version is not None
        and holds_version(connection, catalog_version, len(desired))
    ):
        # The store already holds this catalog: nothing to add, change, orphan or rewrite.
        return SyncPlan(repaired=_repair_suspects(connection, desired, now))
    stored = list_schedules(connection, None if prune else [want.job_name for want in desired])
    plan = diff_schedules(list(stored.values()), desired)
    if not prune:
        plan.orphaned = []
    wanted = {want.job_name: want for want in desired}
    inserted = _insert(connection, plan.added, now, catalog_version)
    changed = {change.job_name for change in plan.changed}
    for change in plan.changed:
        _update(connection, stored[change.job_name], wanted[change.job_name], now)
    for name, want in wanted.items():
        row = stored.get(name)
        if row is not None and name not in changed and _repair(connection, row, want, now):
            plan.repaired.append(name)
    _write_declarations(connection, desired, stored)
    if plan.orphaned:
        orphan_schedules(connection, plan.orphaned, now)
    # The rows this sync inserted carry the version already; on a first start that is all of
    # them, and the statement naming 10,000 jobs to change none is left out.
    restamp = [name for name in wanted if name not in inserted]
    if catalog_version is not None and restamp:
        connection.execute(
            update(schedules)
            .where(
                schedules.c.job_name.in_(restamp),
                (schedules.c.catalog_version != catalog_version)
                | schedules.c.catalog_version.is_(None),
            )
            .values(catalog_version=catalog_version)
        )
    return plan


def holds_version(connection: Connection, catalog_version: str, count: int) -> bool:
    """Whether the store already holds catalog ``catalog_version`` of ``count`` jobs (that many
    live rows stamped with it, and no other live declared row), in one statement."""
    stamped = and_(
        schedules.c.catalog_version == catalog_version, schedules.c.declaration.is_not(None)
    )
    live = not_(schedules.c.orphaned)
    held = func.count(case((and_(live, stamped), 1)))
    other = func.count(case((and_(live, schedules.c.trigger_source != "api", not_(stamped)), 1)))
    found = connection.execute(select(held, other)).one()
    return int(found[0]) == count and int(found[1]) == 0


def orphan_schedules(connection: Connection, names: Sequence[str], now: datetime) -> None:
    """Mark the jobs' schedule rows orphaned: kept, never deleted, and never due."""
    connection.execute(
        update(schedules)
        .where(schedules.c.job_name.in_(names), schedules.c.orphaned.is_(False))
        .values(orphaned=True, next_occurrence=None, due_at=None, updated_at=now)
    )


def _repair_suspects(
    connection: Connection, desired: Sequence[DesiredSchedule], now: datetime
) -> list[str]:
    """:func:`_repair` the rows whose next occurrence is missing or implausibly far ahead,
    picked in SQL: a sound row's trigger is not computed."""
    by_name = {want.job_name: want for want in desired}
    c = schedules.c
    query = select(schedules).where(
        c.enabled,
        not_(c.orphaned),
        or_(
            c.next_occurrence.is_(None),
            and_(c.due_at.is_(None), not_(c.paused)),
            c.next_occurrence > now + _FAR_AHEAD,
            and_(c.trigger_kind == "interval", c.next_occurrence > now),
        ),
    )
    repaired = []
    for found in connection.execute(query).mappings():
        row = ScheduleRecord.from_row(found)
        want = by_name.get(row.job_name)
        if want is not None and _repair(connection, row, want, now):
            repaired.append(row.job_name)
    return sorted(repaired)


_DECLARED = ("description", "critical", "dst_policy", "job_source", "declaration")
_TRIGGER = ("module", "trigger_kind", "trigger_expression", "timezone", "trigger_source", "enabled")


def _declared(want: DesiredSchedule) -> dict[str, object]:
    return {column: getattr(want, column) for column in _DECLARED}


def _trigger(want: DesiredSchedule) -> dict[str, object]:
    return {**{column: getattr(want, column) for column in _TRIGGER}, "orphaned": False}


def _write_declarations(
    connection: Connection,
    desired: Sequence[DesiredSchedule],
    stored: dict[str, ScheduleRecord],
) -> None:
    changed = [
        {"b_job": want.job_name, **{f"b_{k}": v for k, v in _declared(want).items()}}
        for want in desired
        if want.declaration is not None
        and want.job_name in stored
        and stored[want.job_name].declaration != want.declaration
    ]
    if changed:
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == bindparam("b_job"))
            .values({column: bindparam(f"b_{column}") for column in _DECLARED}),
            changed,
        )


def _insert(
    connection: Connection,
    added: Sequence[DesiredSchedule],
    now: datetime,
    catalog_version: str | None,
) -> set[str]:
    """Insert the rows of ``added`` (another host may have inserted some first); the names
    that went in."""
    rows = []
    # Jobs with the same trigger share their first occurrence: a catalog of 10,000 jobs on a
    # few hundred distinct triggers computes a few hundred.
    first: dict[tuple[str | None, ...], datetime | None] = {}
    for want in added:
        trigger = (want.trigger_kind, want.trigger_expression, want.timezone, want.dst_policy)
        if trigger not in first:
            schedule = want.schedule_for(now)
            first[trigger] = schedule.next_after(now) if schedule is not None else None
        next_fire = first[trigger] if want.enabled else None
        rows.append(
            {
                "job_name": want.job_name,
                **_trigger(want),
                "paused": False,
                "next_occurrence": next_fire,
                "due_at": next_fire,
                "interval_anchor": now,
                "fencing_token": 0,
                "catalog_version": catalog_version,
                "created_at": now,
                "updated_at": now,
                **_declared(want),
            }
        )
    return copy_ignoring_duplicates(connection, schedules, rows, "job_name")


def _repair(
    connection: Connection, row: ScheduleRecord, want: DesiredSchedule, now: datetime
) -> bool:
    """Recompute a next occurrence the trigger would never produce (a hand edit, a restore),
    unless another replica advanced the row meanwhile."""
    if not row.enabled or row.orphaned:
        return False
    schedule = want.schedule_for(row.interval_anchor or now)
    expected = schedule.next_after(now) if schedule is not None else None
    if expected is None:
        return False
    plausible = row.next_occurrence is not None and row.next_occurrence <= expected
    if plausible and (row.due_at is not None or row.paused):
        return False
    # Compared with None, the column is tested IS NULL.
    unchanged = schedules.c.next_occurrence == row.next_occurrence
    values: dict[str, object] = {"updated_at": now}
    if row.next_occurrence is None or row.next_occurrence > expected:
        values |= {"next_occurrence": expected, "due_at": expected}
    else:
        values["due_at"] = row.next_occurrence
    if row.trigger_kind == "interval" and row.interval_anchor is None:
        values["interval_anchor"] = expected
    result = connection.execute(
        update(schedules).where(schedules.c.job_name == row.job_name, unchanged).values(**values)
    )
    return bool(result.rowcount)


def _update(
    connection: Connection, row: ScheduleRecord, want: DesiredSchedule, now: datetime
) -> None:
    values = {**_trigger(want), "updated_at": now}
    reschedule = trigger_changed(row, want) or (want.enabled and not row.enabled) or row.orphaned
    if reschedule or not want.enabled:
        anchor = now if trigger_changed(row, want) else row.interval_anchor or now
        schedule = want.schedule_for(anchor)
        enabled_next = schedule.next_after(now) if schedule is not None else None
        values.update(
            next_occurrence=enabled_next if want.enabled else None,
            due_at=enabled_next if want.enabled else None,
            interval_anchor=anchor,
            missed_through=None,
        )
    connection.execute(
        update(schedules)
        .where(
            schedules.c.job_name == row.job_name,
            schedules.c.updated_at == row.updated_at,
        )
        .values(**values)
    )
