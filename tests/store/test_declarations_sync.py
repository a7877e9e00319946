"""A host's sync writes each job's effective declaration into its row, in one statement; a host
starting with the catalog version the store already holds rewrites none of them."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select, update

from jobhost.store import reading
from jobhost.store.registry import holds_version
from jobhost.store.schema import schedules
from tests.support import ManualClock

NIGHTLY = {
    "name": "sample.nightly",
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "dst_gap": "skip",
    "critical": True,
    "description": "Closes the day",
    "timeout": "10m",
    "max_attempts": 3,
}
EVERY = {"name": "sample.every", "interval": "15m"}


def _rows(engine: Any) -> dict[str, dict[str, Any]]:
    columns = [
        schedules.c.job_name,
        schedules.c.description,
        schedules.c.critical,
        schedules.c.dst_policy,
        schedules.c.job_source,
        schedules.c.declaration,
        schedules.c.catalog_version,
    ]
    with reading(engine) as connection:
        return {r["job_name"]: dict(r) for r in connection.execute(select(*columns)).mappings()}


def test_a_sync_writes_each_jobs_declaration(replicas: Any) -> None:
    (host,) = replicas([NIGHTLY, EVERY])
    rows = _rows(host.engine)
    nightly = rows["sample.nightly"]
    assert (nightly["description"], nightly["critical"], nightly["dst_policy"]) == (
        "Closes the day",
        True,
        "dst_gap=skip",
    )
    assert nightly["job_source"] == "module"
    declared = json.loads(nightly["declaration"])
    assert declared["timeout"] == 600.0
    assert declared["retry"]["max_attempts"] == 3
    assert rows["sample.every"]["critical"] is False
    assert rows["sample.every"]["dst_policy"] is None
    assert {row["catalog_version"] for row in rows.values()} == {host.ticker.catalog_version}


def test_a_restart_with_the_held_version_rewrites_nothing(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([NIGHTLY, EVERY])
    with host.engine.begin() as connection:
        assert holds_version(connection, host.ticker.catalog_version, 2)
        # Marked by hand: a sync that rewrote the declarations would overwrite it.
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == "sample.every")
            .values(description="marked")
        )
    plan = host.ticker.sync(clock())
    assert plan.empty and plan.repaired == []
    assert _rows(host.engine)["sample.every"]["description"] == "marked"


def test_a_changed_declaration_is_a_new_version_and_is_written(
    replicas: Any, clock: ManualClock
) -> None:
    (first,) = replicas([NIGHTLY, EVERY])
    (second,) = replicas([{**NIGHTLY, "description": "Closes the day, late"}, EVERY])
    assert second.ticker.catalog_version != first.ticker.catalog_version
    with first.engine.begin() as connection:
        assert holds_version(connection, second.ticker.catalog_version, 2)
        assert not holds_version(connection, first.ticker.catalog_version, 2)
    rows = _rows(second.engine)
    assert rows["sample.nightly"]["description"] == "Closes the day, late"
    assert {row["catalog_version"] for row in rows.values()} == {second.ticker.catalog_version}


def test_a_job_no_longer_declared_is_not_held(replicas: Any) -> None:
    (host,) = replicas([NIGHTLY, EVERY])
    (fewer,) = replicas([NIGHTLY])
    assert fewer.ticker.catalog_version != host.ticker.catalog_version
    with fewer.engine.begin() as connection:
        # The orphaned row is not live: the store holds exactly the smaller catalog now.
        assert holds_version(connection, fewer.ticker.catalog_version, 1)
        connection.execute(
            update(schedules).where(schedules.c.job_name == "sample.every").values(orphaned=False)
        )
        assert not holds_version(connection, fewer.ticker.catalog_version, 1)
