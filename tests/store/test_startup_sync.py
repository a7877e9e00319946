"""A host's first start writes every job's first occurrence, computed once per distinct trigger
yet right for each job; a restart with the same catalog finds the same version and leaves every
row as the first start wrote it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from jobhost.firing.tick import Ticker
from jobhost.store import reading
from jobhost.store.schema import schedules
from tests.support import ManualClock, sample_catalog

JOBS = [
    *({"name": f"sample.hourly-{i}", "cron": "0 * * * *"} for i in range(3)),
    *(
        {"name": f"sample.berlin-{i}", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}
        for i in range(2)
    ),
    {"name": "sample.seconds", "cron": "*/20 30 9 * * *"},
    {"name": "sample.mondays", "cron": "15 9 * * mon"},
    {"name": "sample.kolkata", "cron": "45 9-11 * * *", "timezone": "Asia/Kolkata"},
    {"name": "sample.every", "interval": "15m"},
    {"name": "sample.off", "cron": "0 * * * *", "enabled": False},
]

# The clock stands at Monday 2026-05-04 09:59:30 UTC (11:59:30 in Berlin, 15:29:30 in Kolkata).
FIRST = {
    **{f"sample.hourly-{i}": datetime(2026, 5, 4, 10, 0, tzinfo=UTC) for i in range(3)},
    **{f"sample.berlin-{i}": datetime(2026, 5, 5, 0, 30, tzinfo=UTC) for i in range(2)},
    "sample.seconds": datetime(2026, 5, 5, 9, 30, 0, tzinfo=UTC),
    "sample.mondays": datetime(2026, 5, 11, 9, 15, tzinfo=UTC),
    "sample.kolkata": datetime(2026, 5, 5, 4, 15, tzinfo=UTC),
    "sample.every": datetime(2026, 5, 4, 10, 14, 30, tzinfo=UTC),
    "sample.off": None,
}


def _rows(engine: Any) -> dict[str, dict[str, Any]]:
    with reading(engine) as connection:
        found = connection.execute(select(schedules)).mappings()
        return {row["job_name"]: dict(row) for row in found}


def test_a_first_start_writes_each_jobs_own_first_occurrence(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    rows = _rows(host.engine)
    assert {name: row["next_occurrence"] for name, row in rows.items()} == FIRST
    assert {name: row["due_at"] for name, row in rows.items()} == FIRST
    assert {row["catalog_version"] for row in rows.values()} == {host.ticker.catalog_version}
    assert all(row["declaration"] for row in rows.values())


def test_a_restart_with_the_same_catalog_keeps_every_row(
    replicas: Any, sample_settings: Any, clock: ManualClock, telemetry: Any
) -> None:
    (host,) = replicas(JOBS)
    first = _rows(host.engine)
    clock.advance(seconds=20)
    settings = sample_settings(JOBS)
    # A new process: the catalog built again from the plugin, a new ticker on the same store.
    again = Ticker(
        host.store,
        sample_catalog(settings).jobs,
        host_id="host-restarted",
        lease_duration=settings.lease_duration,
        telemetry=telemetry[0],
    )
    assert again.catalog_version == host.ticker.catalog_version
    plan = again.sync(clock())
    assert plan.empty and plan.repaired == []
    assert _rows(host.engine) == first
