"""Keeping the store honest each tick: dead hosts' runs recorded, implausible values repaired."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy import true, update
from sqlalchemy.engine import Engine

from jobhost.catalog import JobSpec
from jobhost.envelope.retries import retry_delay, should_retry
from jobhost.envelope.telemetry import Telemetry
from jobhost.store import ScheduleRecord, ledger
from jobhost.store.claims import new_run_id
from jobhost.store.records import RUNNING
from jobhost.store.schema import runs, schedules

__all__ = ["record_abandoned", "repair_schedules"]

_log = logging.getLogger("jobhost.firing")


def record_abandoned(
    engine: Engine,
    now: datetime,
    telemetry: Telemetry,
    jobs: Mapping[str, JobSpec] | None = None,
) -> None:
    """Record ``abandoned`` the runs whose host stopped renewing their lease, and free leases.

    A job whose retry policy lists ``abandoned`` in ``retry_on`` gets its next attempt queued,
    with the occurrence's idempotency key, so the attempt continues the dead run's work.
    """
    with engine.begin() as connection:
        for run in ledger.abandon_expired_runs(connection, now):
            telemetry.runs.add(1, {"job": run.job_name, "outcome": "abandoned"})
            _log.warning(
                "job %s run %s abandoned: host %s stopped renewing its lease",
                run.job_name,
                run.id,
                run.host_id,
            )
            spec = (jobs or {}).get(run.job_name)
            policy = spec.declaration.retry if spec is not None else None
            if policy is not None and should_retry(policy, "abandoned", run.attempt):
                delay = retry_delay(policy, run.attempt)
                ledger.queue_retry(
                    connection, run, run_id=new_run_id(), now=now, not_before=now + delay
                )
        ledger.release_expired_leases(connection, now)


def repair_schedules(
    engine: Engine,
    jobs: Mapping[str, JobSpec],
    rows: list[ScheduleRecord],
    now: datetime,
    implausible_lease: timedelta,
) -> bool:
    """Repair rows whose next occurrence or lease cannot be right; True when any was.

    Stored values are not trusted blindly: a next occurrence the trigger would never produce,
    or a lease further out than any renewal could set (a hand edit, a broken restore), must not
    silence a job forever.
    """
    repaired = False
    for row in rows:
        spec = jobs.get(row.job_name)
        if spec is None or not row.enabled or row.orphaned:
            continue
        schedule = spec.schedule(row.interval_anchor or now)
        expected = schedule.next_after(now) if schedule is not None else None
        wrong_next = expected is not None and (
            row.next_occurrence is None or row.next_occurrence > expected
        )
        wrong_lease = (
            row.lease_expires_at is not None and row.lease_expires_at > now + implausible_lease
        )
        if not (wrong_next or wrong_lease):
            continue
        values: dict[str, object] = {}
        if wrong_next:
            _log.warning(
                "job %s: stored next occurrence %s is not one its trigger produces "
                "(expected %s); repaired",
                row.job_name,
                row.next_occurrence,
                expected,
            )
            values["next_occurrence"] = expected
        if wrong_lease:
            _log.warning(
                "job %s: stored lease expiry %s is implausibly far ahead; treated as expired",
                row.job_name,
                row.lease_expires_at,
            )
            values["lease_expires_at"] = now
        with engine.begin() as connection:
            # Compare-and-set on what was read, unless it was unreadable (then it is None).
            unchanged = (
                schedules.c.next_occurrence == row.next_occurrence
                if row.next_occurrence is not None
                else true()
            )
            connection.execute(
                update(schedules)
                .where(schedules.c.job_name == row.job_name, unchanged)
                .values(**values)
            )
            if wrong_lease and row.lease_run_id:
                connection.execute(
                    update(runs)
                    .where(runs.c.id == row.lease_run_id, runs.c.outcome == RUNNING)
                    .values(lease_expires_at=now)
                )
        repaired = True
    return repaired
