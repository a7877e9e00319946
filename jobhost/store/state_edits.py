"""An operator's reading and changing of a job's durable state (``jobhost state``, the API, the
job page), next to the runs that write it through ``JobContext.state``.

A change goes through the fence a state that belongs to no run uses (:mod:`jobhost.store.state`):
the job's schedule row is held for the transaction, so a claim cannot start a run of it halfway,
and the value is written with the job's current fencing token. It is refused while a run of the
job is running: that run holds the state and may write it at any moment, and a value changed
under it would be lost or half-applied. The change and its change-log entry commit together.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import LiveRun, StateChange, StateEntry, StateHeld
from jobhost.store.clock import database_now
from jobhost.store.runtime import record_change
from jobhost.store.schema import IS_RUNNING, job_state, runs
from jobhost.store.state import delete_value, put_value, schedule_token

__all__ = [
    "change_state_logged",
    "list_state",
]


def list_state(connection: Connection, job_name: str, *, limit: int) -> Sequence[StateEntry]:
    """Up to ``limit`` keys of the job's state, by key (the table's primary key order)."""
    columns = (job_state.c.key, job_state.c.value, job_state.c.updated_at)
    rows = connection.execute(
        select(*columns, job_state.c.fencing_token)
        .where(job_state.c.job_name == job_name)
        .order_by(job_state.c.key)
        .limit(limit)
    )
    return [StateEntry(str(k), str(v), at, int(token)) for k, v, at, token in rows]


def change_state_logged(
    engine: Engine,
    job_name: str,
    key: str,
    value: str | None,
    *,
    actor: str,
    reason: str,
    clock: Clock,
) -> StateChange:
    """Set ``key`` to ``value`` (``None``: delete it) and log the change; raises
    :class:`StateHeld` while a run of the job is running. Nothing that changes nothing is
    logged."""
    with engine.begin() as connection:
        now = database_now(connection, clock)
        token = schedule_token(connection, job_name)
        if token is None:
            return StateChange(now, None, None, known=False, changed=False)
        live = _live_run(connection, job_name)
        if live is not None:
            raise StateHeld(job_name, live)
        before = _value(connection, job_name, key)
        if before == value:
            return StateChange(now, before, value, changed=False)
        if value is None:
            delete_value(connection, job_name, key)
        else:
            put_value(connection, job_name, key, value, token=token, now=now)
        record_change(
            connection,
            at=now,
            actor=actor,
            action="state-delete" if value is None else "state-set",
            job_name=job_name,
            before={"key": key, "value": before},
            after={"key": key, "value": value},
            reason=reason,
        )
        return StateChange(now, before, value)


def _live_run(connection: Connection, job_name: str) -> LiveRun | None:
    # The partial index of running runs: the rows read are the job's live ones only.
    row = connection.execute(
        select(runs.c.id, runs.c.host_id, runs.c.started_at)
        .where(IS_RUNNING, runs.c.job_name == job_name)
        .order_by(runs.c.started_at)
        .limit(1)
    ).first()
    return None if row is None else LiveRun(str(row.id), row.host_id, row.started_at)


def _value(connection: Connection, job_name: str, key: str) -> str | None:
    value = connection.execute(
        select(job_state.c.value).where(job_state.c.job_name == job_name, job_state.c.key == key)
    ).scalar()
    return None if value is None else str(value)
