"""Keeping the store honest: runs of dead hosts recorded abandoned, and retried by policy."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy.engine import Connection, Engine

from jobhost.envelope.retries import next_attempt
from jobhost.envelope.telemetry import Telemetry
from jobhost.rules.claiming import FiringRules
from jobhost.store import hosts as host_rows
from jobhost.store import ledger
from jobhost.store.records import RunRecord

__all__ = ["record_abandoned", "settle_earlier_incarnations"]

_log = logging.getLogger("jobhost.firing")


def record_abandoned(
    engine: Engine,
    now: datetime,
    telemetry: Telemetry,
    rules: FiringRules,
    *,
    implausible: timedelta,
) -> None:
    """Record ``abandoned`` the runs whose host stopped renewing their lease; queue the retries
    their jobs' policies ask for; free leases nobody holds any more."""
    with engine.begin() as connection:
        gone = ledger.abandon_expired_runs(connection, now, implausible=implausible)
        _retry_abandoned(connection, gone, now, telemetry, rules, why="stopped renewing its lease")
        ledger.release_expired_leases(connection, now)


def settle_earlier_incarnations(
    connection: Connection,
    host_id: str,
    now: datetime,
    telemetry: Telemetry,
    rules: FiringRules,
) -> None:
    """Record ``abandoned`` the runs an earlier process of ``host_id`` left running, and queue
    the retries their jobs' policies ask for (a fan-out's retry does only its units not done)."""
    gone = host_rows.settle_earlier_incarnations(connection, host_id, now)
    _retry_abandoned(connection, gone, now, telemetry, rules, why="restarted")


def _retry_abandoned(
    connection: Connection,
    gone: list[RunRecord],
    now: datetime,
    telemetry: Telemetry,
    rules: FiringRules,
    *,
    why: str,
) -> None:
    retries = []
    for run in gone:
        telemetry.runs.add(1, {"job": run.job_name, "outcome": "abandoned"})
        _log.warning("job %s run %s abandoned: host %s %s", run.job_name, run.id, run.host_id, why)
        policy = rules.retry_policy(run.job_name)
        retry = None
        if policy is not None:
            retry = next_attempt(
                policy,
                "abandoned",
                job_name=run.job_name,
                occurrence=run.occurrence,
                attempt=run.attempt,
                idempotency_key=run.idempotency_key,
                requested_by=run.requested_by,
                reason=run.reason,
                at=now,
                backfill_id=run.backfill_id,
            )
        if retry is not None:
            retries.append(retry)
    ledger.queue_retries(connection, retries, now)
