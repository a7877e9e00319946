"""The rows every corpus store starts with (one or more in every table), and ways to damage them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.engine import Connection

from jobhost.store.engine import insert_returning_new
from jobhost.store.schema import hosts, job_idempotency, job_state, runs, schedules, signals

JOB = "unruly.succeed"
OTHER = "unruly.fail-secret"


def fill_rows(connection: Connection) -> None:
    now = datetime.now(UTC)
    hour = timedelta(hours=1)
    ledger = [
        _run("run-ok", JOB, "succeeded", now - 3 * hour),
        _run("run-failed", JOB, "failed", now - 2 * hour, error="refused by the bank"),
        _run("run-other", OTHER, "succeeded", now - hour),
    ]
    connection.execute(runs.insert(), ledger)
    for run in ledger:
        _summarise(connection, run)
    connection.execute(
        hosts.insert(),
        [
            {
                "id": "replica-old",
                "hostname": "box",
                "pid": 4242,
                "version": "0.1.0",
                "started_at": now - 5 * hour,
                "last_seen_at": now - 4 * hour,
                "host_clock_at": now - 4 * hour,
                "heartbeat_seconds": 5,
                "stopped_at": now - 4 * hour,
            }
        ],
    )
    connection.execute(
        job_state.insert(),
        [
            {
                "job_name": JOB,
                "key": "cursor",
                "value": "42",
                "fencing_token": 1,
                "updated_at": now - hour,
            }
        ],
    )
    connection.execute(
        job_idempotency.insert(),
        [
            {
                "job_name": JOB,
                "key": "occurrence-1",
                "run_id": "run-ok",
                "fencing_token": 1,
                "recorded_at": now - 3 * hour,
            }
        ],
    )
    connection.execute(delete(signals))
    insert_returning_new(connection, signals, [{"id": 1, "version": 1}], ["id"])


def _run(
    run_id: str, job: str, outcome: str, at: datetime, error: str | None = None
) -> dict[str, object]:
    return {
        "id": run_id,
        "job_name": job,
        "occurrence": at,
        "attempt": 1,
        "source": "schedule",
        "outcome": outcome,
        "host_id": "replica-old",
        "queued_at": at,
        "started_at": at,
        "finished_at": at + timedelta(seconds=2),
        "error_type": "Failure" if error else None,
        "error_message": error,
    }


def _summarise(connection: Connection, run: dict[str, Any]) -> None:
    """The job's last-run summary on its schedule row, as recording the run writes it (runs are
    given oldest first)."""
    summary = {
        "last_run_id": run["id"],
        "last_outcome": run["outcome"],
        "last_started_at": run["started_at"],
        "last_finished_at": run["finished_at"],
        "last_error": run["error_message"],
    }
    if run["outcome"] == "succeeded":
        summary["last_success_at"] = run["finished_at"]
    connection.execute(
        update(schedules).where(schedules.c.job_name == run["job_name"]).values(**summary)
    )


def set_value(table: str, column: str, value: str, where: str = "") -> str:
    """SQL that writes a raw value (often of the wrong type) into every matching row."""
    condition = f" WHERE {where}" if where else ""
    return f"UPDATE {table} SET {column} = {value}{condition};"
