"""Concurrency groups in the store: their limits, their members, and how busy each one is. A
host writes ``[concurrency_limits]`` and its jobs' groups when it starts (the newest start
wins); a runtime job's group is written with its schedule row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Connection

from jobhost.records import PENDING, RUNNING, GroupSummary
from jobhost.store.schema import concurrency_groups, runs, schedules

__all__ = ["group_summaries", "write_group_limits", "write_group_members"]


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
