"""Runs that wait in the store for a host: manual run requests and pending retries.

Both start under the job's lease like a scheduled run, so the overlap policy and the fencing
token treat them alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.engine import Connection, Engine

from jobhost.catalog import JobSpec
from jobhost.firing.policy import lease_for, may_start
from jobhost.store import claims
from jobhost.store.claims import Claim
from jobhost.store.records import RequestRecord, RunRecord
from jobhost.store.schema import run_requests

__all__ = ["QueuedWork"]


class QueuedWork:
    """Takes queued runs for one host."""

    def __init__(
        self, engine: Engine, jobs: Mapping[str, JobSpec], *, host_id: str, lease: timedelta
    ) -> None:
        self._engine = engine
        self._jobs = jobs
        self._host_id = host_id
        self._lease = lease

    def take_requests(self, now: datetime, limit: int) -> list[tuple[Claim, JobSpec]]:
        """Start up to ``limit`` pending manual run requests, oldest first, or refuse them."""
        taken: list[tuple[Claim, JobSpec]] = []
        with self._engine.begin() as connection:
            for request in claims.claim_pending_requests(connection, self._host_id, limit):
                started = self._start_request(connection, request, now)
                if started is not None:
                    taken.append(started)
        return taken

    def take_request(self, request_id: str, now: datetime) -> tuple[Claim, JobSpec] | None:
        """Start (or refuse) the one pending request ``request_id``, as a host would.

        ``jobhost trigger`` calls this to run a request in its own process when no host is
        alive. None when the request is no longer pending (a host took it) or was refused
        (the request's ``message`` says why).
        """
        with self._engine.begin() as connection:
            taken = claims.claim_pending_requests(
                connection, self._host_id, 1, request_id=request_id
            )
            return self._start_request(connection, taken[0], now) if taken else None

    def _start_request(
        self, connection: Connection, request: RequestRecord, now: datetime
    ) -> tuple[Claim, JobSpec] | None:
        """Start the claimed ``request`` under the job's lease, or record why it is refused."""
        spec = self._jobs.get(request.job_name)
        if spec is None:
            claims.refuse_request(
                connection,
                request.id,
                f"job {request.job_name!r} is not declared by the modules of host {self._host_id}",
            )
            return None
        row = claims.lock_schedule(connection, request.job_name)
        live = claims.live_runs(connection, request.job_name, now)
        lease_live = row.lease_live(now) if row is not None else False
        if not may_start(spec.declaration, len(live), lease_live):
            claims.refuse_request(connection, request.id, _overlap_message(live))
            return None
        if row is None:
            claims.refuse_request(
                connection,
                request.id,
                f"job {request.job_name!r} has no schedule in the store yet",
            )
            return None
        lease = lease_for(spec.declaration, self._lease)
        run_id = claims.new_run_id()
        token = claims.take_lease(connection, row, self._host_id, run_id, now + lease)
        claim = claims.start_run(
            connection,
            run_id=run_id,
            job_name=request.job_name,
            occurrence=None,
            attempt=1,
            source="manual",
            host_id=self._host_id,
            fencing_token=token,
            idempotency_key=f"{request.job_name}:manual:{run_id}",
            now=now,
            lease_until=now + lease,
            requested_by=request.requested_by,
            reason=request.reason,
            queued_at=request.requested_at,
        )
        connection.execute(
            update(run_requests)
            .where(run_requests.c.id == request.id)
            .values(status="started", run_id=run_id)
        )
        return claim, spec

    def take_retries(self, now: datetime, limit: int) -> list[tuple[Claim, JobSpec]]:
        """Start up to ``limit`` retries whose backoff has passed and whose job is free."""
        taken: list[tuple[Claim, JobSpec]] = []
        with self._engine.begin() as connection:
            for pending in claims.claim_pending_retries(connection, now, limit):
                spec = self._jobs.get(pending.job_name)
                if spec is None:
                    continue
                row = claims.lock_schedule(connection, pending.job_name)
                if row is None:
                    continue
                live = claims.live_runs(connection, pending.job_name, now)
                if not may_start(spec.declaration, len(live), row.lease_live(now)):
                    continue
                lease = lease_for(spec.declaration, self._lease)
                token = claims.take_lease(connection, row, self._host_id, pending.id, now + lease)
                claim = claims.activate_retry(
                    connection,
                    pending,
                    host_id=self._host_id,
                    fencing_token=token,
                    now=now,
                    lease_until=now + lease,
                )
                if claim is not None:
                    taken.append((claim, spec))
        return taken


def _overlap_message(running: list[RunRecord]) -> str:
    if not running:
        return "refused: a run of this job is still running (overlap policy forbid)"
    first = running[0]
    started = first.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") if first.started_at else "?"
    return (
        f"refused: run {first.id} is still running on host {first.host_id} since {started} "
        "(overlap policy forbid)"
    )
