"""The bounded integrity check and the full audit, on both stores.

The bounded check (``health``'s ``store-integrity``) reads only what a host reads, counts every
offending row and shows at most its limit; the full audit streams every table in batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.integrity import audit_store, check_live_rows
from jobhost.store.schema import hosts, runs, schedules

NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
IMPLAUSIBLE = timedelta(hours=1)


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = create_store_engine(store_url, create=True)
    upgrade(engine)
    yield engine
    engine.dispose()


def _schedule(name: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "job_name": name,
        "module": "sample",
        "trigger_kind": "cron",
        "trigger_expression": "0 3 * * *",
        "timezone": "UTC",
        "trigger_source": "declaration",
        "enabled": True,
        "orphaned": False,
        "paused": False,
        "next_occurrence": NOW + timedelta(hours=1),
        "due_at": NOW + timedelta(hours=1),
        "fencing_token": 0,
        "lease_expires_at": None,  # every row names every column: one statement inserts them
        "created_at": NOW,
        "updated_at": NOW,
    }
    return row | values


def _run(run_id: str, job: str, outcome: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": run_id,
        "job_name": job,
        "occurrence": None,  # manual runs: no unique occurrence to share
        "attempt": 1,
        "source": "manual",
        "outcome": outcome,
        "host_id": "replica-0",
        "queued_at": NOW - timedelta(hours=1),
        "lease_expires_at": NOW + timedelta(minutes=1) if outcome == "running" else None,
    }
    return row | values


def test_a_clean_store_passes_and_says_what_was_covered(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(insert(schedules), [_schedule(f"job.{i}") for i in range(3)])
        connection.execute(
            insert(runs),
            [_run("r-live", "job.0", "running"), _run("r-done", "job.1", "succeeded")],
        )
    with reading(engine) as connection:
        result = check_live_rows(connection, NOW, IMPLAUSIBLE)
    assert result.total == 0 and result.found == []
    assert result.covered["schedule rows"] == 3
    assert result.covered["live runs"] == 1  # the finished run is the full audit's
    assert "3 schedule rows, 1 live runs" in result.coverage()


def test_offending_rows_are_counted_and_at_most_the_limit_is_read(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            insert(schedules),
            [
                *(_schedule(f"neg.{i:02}", fencing_token=-i - 1) for i in range(12)),
                _schedule("zone.bad", timezone="Mars/Base"),
                _schedule("lease.far", lease_expires_at=NOW + timedelta(days=400)),
                _schedule("next.none", next_occurrence=None),
                _schedule("fine"),
            ],
        )
        connection.execute(
            insert(runs),
            [
                _run("r-far", "fine", "running", lease_expires_at=NOW + timedelta(days=9)),
                _run("r-nolease", "fine", "running", lease_expires_at=None),
                # A finished run with a word no host knows: not what a host reads.
                _run("r-weird", "fine", "exploded"),
            ],
        )
    with reading(engine) as connection:
        result = check_live_rows(connection, NOW, IMPLAUSIBLE, limit=10)
        everything = check_live_rows(connection, NOW, IMPLAUSIBLE, limit=100)
    assert result.total == 17
    assert len(result.found) == 10
    lines = {row.line() for row in everything.found}
    assert len(lines) == 17
    assert "neg.00 (schedules): fencing_token is -1, below 0; set it to 0 or more" in lines
    assert any(line.startswith("zone.bad (schedules): timezone is 'Mars/Base'") for line in lines)
    assert any("lease.far (schedules): lease_expires_at 2027-06-08" in line for line in lines)
    assert any("next.none (schedules): next_occurrence is not a time" in line for line in lines)
    assert any("fine (runs r-far): lease_expires_at" in line for line in lines)
    assert any("fine (runs r-nolease): lease_expires_at is not a time" in line for line in lines)
    assert not any("r-weird" in line for line in lines)


def test_the_full_audit_streams_every_table_in_batches(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(insert(schedules), [_schedule("fine")])
        connection.execute(
            insert(runs),
            [_run(f"r-{i:02}", "fine", "succeeded") for i in range(10)]
            + [_run("r-weird", "fine", "exploded")],
        )
    steps = list(audit_store(engine, batch=4))
    run_steps = [step for step in steps if step.table == "runs"]
    assert [step.rows for step in run_steps] == [4, 8, 11, 11]
    assert run_steps[-1].finished and not any(step.finished for step in run_steps[:-1])
    problems = [problem.line() for step in steps for problem in step.problems]
    assert len(problems) == 1
    assert problems[0].startswith("fine (runs r-weird): outcome is 'exploded', not one of")
    finished = [step.table for step in steps if step.finished]
    assert finished == [
        "schedules",
        "runs",
        "hosts",
        "job_state",
        "job_idempotency",
        "signals",
    ]


def test_the_health_rows_hold_the_live_hosts_or_every_host_when_asked(engine: Engine) -> None:
    store = Store(engine)
    now = store.now()

    def host(host_id: str, seen: datetime, stopped: datetime | None = None) -> dict[str, Any]:
        return {
            "id": host_id,
            "hostname": "box",
            "pid": 1,
            "version": "1",
            "started_at": now - timedelta(hours=2),
            "last_seen_at": seen,
            "host_clock_at": seen,
            "heartbeat_seconds": 10,
            "stopped_at": stopped,
        }

    with engine.begin() as connection:
        connection.execute(
            insert(hosts),
            [
                host("live", now),
                host("silent", now - timedelta(hours=1)),
                host("stopped", now, stopped=now),
            ],
        )
    assert store.health_rows(checks=True)[1].hosts == []
    assert [h.id for h in store.health_rows(hosts="alive")[1].hosts] == ["live"]
    every = store.health_rows(hosts="all")[1].hosts
    assert sorted(h.id for h in every) == ["live", "silent", "stopped"]
