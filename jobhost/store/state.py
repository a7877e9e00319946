"""Durable per-job state behind ``JobContext.state``, fenced by the run's lease token.

A write first locks the job's schedule row and compares the run's token with the job's current
one: a run whose lease was taken over (a newer token exists) gets ``StaleLeaseError`` and changes
nothing, so it can neither move a cursor backwards nor mark work done twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from jobhost_contracts import StaleLeaseError
from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine

from jobhost.store._sql import insert_ignoring_duplicates
from jobhost.store.engine import reading
from jobhost.store.schema import job_idempotency, job_state, schedules

__all__ = ["StoreJobState"]


class StoreJobState:
    """The :class:`jobhost_contracts.JobState` of one run."""

    def __init__(
        self,
        engine: Engine,
        job_name: str,
        fencing_token: int,
        clock: Callable[[], datetime],
        run_id: str | None = None,
    ) -> None:
        self._engine = engine
        self._job = job_name
        self._token = fencing_token
        self._clock = clock
        self._run_id = run_id

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
            now = self._clock()
            written = insert_ignoring_duplicates(
                connection,
                job_state,
                [
                    {
                        "job_name": self._job,
                        "key": key,
                        "value": value,
                        "fencing_token": self._token,
                        "updated_at": now,
                    }
                ],
                ["job_name", "key"],
            )
            if not written:
                connection.execute(
                    update(job_state)
                    .where(job_state.c.job_name == self._job, job_state.c.key == key)
                    .values(value=value, fencing_token=self._token, updated_at=now)
                )

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
        # FOR UPDATE (without SKIP LOCKED): a claim taking the lease waits for this write.
        query = select(schedules.c.fencing_token).where(schedules.c.job_name == self._job)
        if connection.dialect.name == "postgresql":
            query = query.with_for_update()
        current = connection.execute(query).scalar()
        if current is not None and int(current) > self._token:
            raise StaleLeaseError(self._job, self._token, int(current))
