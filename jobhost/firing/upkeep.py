"""Keeping the store honest: runs of dead hosts recorded abandoned, and retried by policy."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from jobhost.envelope.retries import next_attempt
from jobhost.envelope.telemetry import Telemetry
from jobhost.records import RetriesFor, RetryRequest, RunRecord
from jobhost.rules.claiming import FiringRules
from jobhost.store import Store

__all__ = ["record_abandoned", "retrying_abandoned"]

_log = logging.getLogger("jobhost.firing")


def record_abandoned(
    store: Store,
    now: datetime,
    telemetry: Telemetry,
    rules: FiringRules,
    *,
    implausible: timedelta,
) -> bool:
    """Record ``abandoned`` the runs whose host stopped renewing their lease; queue the retries
    their jobs' policies ask for; free leases nobody holds any more. True if it did any."""
    return store.abandon_dead_runs(
        now,
        implausible=implausible,
        retries_for=retrying_abandoned(telemetry, rules, why="stopped renewing its lease"),
    )


def retrying_abandoned(telemetry: Telemetry, rules: FiringRules, *, why: str) -> RetriesFor:
    """What to do with runs just recorded ``abandoned``: count and log each, and say the
    retries their jobs' policies ask for (a fan-out's retry does only its units not done)."""

    def retries_for(gone: list[RunRecord], now: datetime) -> list[RetryRequest]:
        retries = []
        for run in gone:
            telemetry.runs.add(1, {"job": run.job_name, "outcome": "abandoned"})
            _log.warning(
                "job %s run %s abandoned: host %s %s", run.job_name, run.id, run.host_id, why
            )
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
                    attempt_base=run.attempt_base,
                )
            if retry is not None:
                retries.append(retry)
        return retries

    return retries_for
