"""Runtime jobs' writes as store operations: each change with its schedule row and its
change-log row in one transaction; and the read a host's reload makes.

What makes a write acceptable (``If-Match``, ``If-None-Match``) is the caller's rule, given as
``check``: it is called with the row as read inside the transaction and raises to refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from jobhost.clock import Clock
from jobhost.records import DesiredSchedule, RuntimeJobRow
from jobhost.store.clock import database_now
from jobhost.store.engine import reading
from jobhost.store.group_limits import write_group_members
from jobhost.store.registry import sync_schedules
from jobhost.store.runtime import (
    delete_runtime_job,
    get_runtime_job,
    insert_runtime_job,
    latest_change_id,
    list_runtime_jobs,
    orphan_schedule,
    record_change,
    update_runtime_job,
)

__all__ = ["Put", "Removed", "changed_runtime_jobs", "put_runtime_job", "remove_runtime_job"]

Check = Callable[[RuntimeJobRow | None], None]


@dataclass(frozen=True)
class Put:
    """What :func:`put_runtime_job` did: ``lost`` when another writer changed the job between
    the read and the write (nothing written); else the rows before and after (the same row
    when the definition was already so)."""

    before: RuntimeJobRow | None
    after: RuntimeJobRow | None
    changed: bool
    lost: bool = False


@dataclass(frozen=True)
class Removed:
    """The row removed; ``lost`` when it changed between the read and the delete."""

    before: RuntimeJobRow | None
    lost: bool = False


def put_runtime_job(
    engine: Engine,
    name: str,
    *,
    stored: dict[str, Any],
    actor: str,
    clock: Clock,
    check: Check,
    schedule: Sequence[DesiredSchedule],
    group: str | None,
    wait_for_writers: bool,
    reason: str | None = None,
) -> Put:
    """Create or replace runtime job ``name`` with ``stored``, its schedule row from
    ``schedule``, its concurrency group, and the change's entry. ``wait_for_writers`` holds the
    row while writing, so an unconditional write waits for a concurrent one instead of losing."""
    try:
        with engine.begin() as connection:
            now = database_now(connection, clock)
            before = get_runtime_job(connection, name, for_update=wait_for_writers)
            check(before)
            kind = str(stored["kind"])
            if before is None:
                insert_runtime_job(
                    connection, name=name, kind=kind, definition=stored, actor=actor, now=now
                )
            elif before.definition == stored:
                return Put(before, before, changed=False)
            elif not update_runtime_job(
                connection,
                name=name,
                kind=kind,
                definition=stored,
                version=before.version,
                actor=actor,
                now=now,
            ):
                return Put(before, None, changed=False, lost=True)
            sync_schedules(connection, schedule, now, prune=False)
            write_group_members(connection, {name: group})
            record_change(
                connection,
                at=now,
                actor=actor,
                action="create" if before is None else "change",
                job_name=name,
                before=before.definition if before is not None else None,
                after=stored,
                reason=reason,
            )
            after = get_runtime_job(connection, name)
    except IntegrityError:  # a concurrent create of the same name came first
        return Put(None, None, changed=False, lost=True)
    return Put(before, after, changed=True)


def remove_runtime_job(
    engine: Engine,
    name: str,
    *,
    actor: str,
    clock: Clock,
    check: Check,
    reason: str | None = None,
) -> Removed:
    """Remove runtime job ``name`` (``before`` None: there is none); its schedule row and
    history stay, the schedule marked orphaned."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        before = get_runtime_job(connection, name)
        check(before)
        if before is None:
            return Removed(None)
        if not delete_runtime_job(connection, name, before.version):
            return Removed(before, lost=True)
        orphan_schedule(connection, name, now)
        record_change(
            connection,
            at=now,
            actor=actor,
            action="delete",
            job_name=name,
            before=before.definition,
            after=None,
            reason=reason,
        )
    return Removed(before)


def changed_runtime_jobs(
    engine: Engine, seen: int | None, *, force: bool = False
) -> tuple[int, list[RuntimeJobRow] | None]:
    """The change log's latest id, and every runtime job when it moved past ``seen`` (or
    ``force``); None when it did not."""
    with reading(engine) as connection:
        latest = latest_change_id(connection)
        if latest == seen and not force:
            return latest, None
        return latest, list_runtime_jobs(connection)
