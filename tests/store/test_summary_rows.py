"""The summary reads of each schedule row only the columns a report reads, and reads each of
them as the whole row holds it, on both stores."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.records import ScheduleRecord, ScheduleSummary
from jobhost.store import reading
from jobhost.store.reports import list_schedules, summary_schedules
from tests.cli.operator_support import Operator, now

JOBS = [
    {"name": "sample.fine", "interval": "1h"},
    {"name": "sample.berlin", "cron": "*/15 * * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.failing", "interval": "10m"},
    {"name": "sample.paused", "interval": "1h"},
    {"name": "sample.leased", "interval": "30m"},
    {"name": "sample.disabled", "interval": "1h", "enabled": False},
]


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(JOBS)
    made.sync()
    at = now()
    made.add_run("sample.fine", "succeeded", started=at - timedelta(minutes=20))
    made.add_run("sample.failing", "failed", started=at - timedelta(minutes=5), error="503")
    made.set_schedule(
        "sample.paused", paused=True, paused_by="ops", paused_at=at, paused_reason="outage"
    )
    made.set_schedule(
        "sample.leased",
        lease_owner="replica-0",
        lease_expires_at=at - timedelta(minutes=1),
        lease_run_id="run-1",
        concurrency_group="warehouse",
        missed_through=at,
    )
    made.add_orphan("sample.gone")
    yield made
    made.close()


def test_each_summary_row_holds_what_the_whole_row_holds(operator: Operator) -> None:
    with reading(operator.engine) as connection:
        whole = list_schedules(connection)
        summary = summary_schedules(connection)

    assert set(summary) == set(whole) == {job["name"] for job in JOBS} | {"sample.gone"}
    shared = list(ScheduleSummary._fields)
    for name, row in summary.items():
        assert [getattr(row, f) for f in shared] == [getattr(whole[name], f) for f in shared]
    left_out = {field.name for field in fields(ScheduleRecord)} - set(shared)
    assert left_out == {
        "missed_through",
        "fencing_token",
        "updated_at",
        "catalog_version",
        "due_at",
        "group_waiting_since",
        "declaration",
    }
    leased = summary["sample.leased"]
    assert (leased.lease_owner, leased.concurrency_group) == ("replica-0", "warehouse")
    assert summary["sample.failing"].last_error == "503"
    assert summary["sample.paused"].paused_reason == "outage"
