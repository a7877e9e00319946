"""Durable per-job state behind ``JobContext.state``, fenced by the run's own lease.

A run's state writes are fenced by its own run row: the write locks that row and goes through
only while the run is still ``running``, owned by this host, with an unexpired lease and the
fencing token it was claimed with. A run that was recorded abandoned (its lease expired and
another replica took the job over) gets ``StaleLeaseError`` and changes nothing, so it can
neither move a cursor backwards nor mark work done twice. A newer run of the same job does not
fence an older live one: under ``overlap = "allow"`` both keep writing.

A state that belongs to no run (tools, tests) is fenced by the job's schedule token instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from jobhost_contracts import StaleLeaseError
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.records import RUNNING
from jobhost.store.engine import database_now, insert_ignoring_duplicates, reading
from jobhost.store.schema import job_idempotency, job_state, runs, schedules

__all__ = ["StoreJobState", "delete_value", "put_value", "schedule_token"]


def schedule_token(connection: Connection, job_name: str) -> int | None:
    """The job's fencing token, its schedule row held until the transaction ends; None when
    the store has no row for the job."""
    # FOR UPDATE (without SKIP LOCKED): a claim taking the lease waits for this write.
    query = select(schedules.c.fencing_token).where(schedules.c.job_name == job_name)
    if connection.dialect.name == "postgresql":
        query = query.with_for_update()
    current = connection.execute(query).scalar()
    return None if current is None else int(current)


def put_value(
    connection: Connection, job_name: str, key: str, value: str, *, token: int, now: datetime
) -> None:
    """Write one key of a job's state, once its fence has been checked."""
    row = {"job_name": job_name, "key": key, "value": value, "fencing_token": token}
    written = insert_ignoring_duplicates(
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
    """The :class:`jobhost_contracts.JobState` of one run.

    With ``run_id`` and ``host_id`` (what the envelope passes) every write checks that run's
    lease, at ``store_time()`` (default: the database's time on PostgreSQL, ``clock`` on SQLite);
    without them the job's current schedule token is the fence.
    """

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
            value = connection.execute(
                select(job_state.c.value).where(
                    job_state.c.job_name == self._job, job_state.c.key == key
                )
            ).scalar()
        return None if value is None else str(value)

    def set(self, key: str, value: str) -> None:
        with self._engine.begin() as connection:
            self._check_fence(connection)
            put_value(connection, self._job, key, value, token=self._token, now=self._clock())

    def record(self, idempotency_key: str) -> bool:
        with self._engine.begin() as connection:
            self._check_fence(connection)
            inserted = insert_ignoring_duplicates(
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
        return inserted > 0

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
        # FOR UPDATE on the run row: recording it abandoned updates that row, so it waits for
        # this write to commit (and then still finds the run running, with the write in before
        # its verdict); a write that comes after the verdict sees it. SQLite's write lock,
        # taken at BEGIN, serialises the two the same way.
        query = select(
            runs.c.outcome, runs.c.host_id, runs.c.lease_expires_at, runs.c.fencing_token
        ).where(runs.c.id == run_id)
        if connection.dialect.name == "postgresql":
            query = query.with_for_update()
        row = connection.execute(query).first()
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
        current = self._current_token(connection)
        raise StaleLeaseError(self._job, self._token, current, run_id=run_id, reason=reason)

    def _current_token(self, connection: Connection) -> int:
        current = connection.execute(
            select(schedules.c.fencing_token).where(schedules.c.job_name == self._job)
        ).scalar()
        return self._token if current is None else int(current)
