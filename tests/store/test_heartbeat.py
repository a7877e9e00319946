"""What a host writes on its own row besides its heartbeat: the catalog it last wrote, and its
last beat, which says it stopped."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from jobhost.records import HostRecord
from jobhost.store import ledger, reading
from jobhost.store.schema import hosts
from tests.support import ManualClock

JOBS = [{"name": f"sample.minutely-{i}", "cron": "* * * * *"} for i in range(3)]


def _register(host: Any, host_id: str | None = None) -> None:
    with host.engine.begin() as connection:
        now = host.clock()
        ledger.register_host(
            connection,
            host_id=host_id or host.host_id,
            hostname="heartbeat-test",
            pid=1,
            version="0",
            now=now,
            host_clock=now,
            heartbeat_seconds=60,
        )


def _host(engine: Any, host_id: str) -> HostRecord:
    with reading(engine) as connection:
        row = connection.execute(select(hosts).where(hosts.c.id == host_id)).mappings().one()
    return HostRecord.from_row(row)


def test_the_host_row_names_the_catalog_its_host_last_wrote(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    _register(host)
    _register(host, "host-other")
    assert _host(host.engine, host.host_id).synced_at is None
    clock.advance(seconds=30)
    host.ticker.sync(clock())
    row = _host(host.engine, host.host_id)
    assert (row.synced_at, row.catalog_version) == (clock(), host.ticker.catalog_version)
    other = _host(host.engine, "host-other")
    assert (other.synced_at, other.catalog_version) == (None, None)


def test_the_last_beat_says_the_host_stopped_and_renews_nothing_else(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    _register(host)
    host.store.beat(host.host_id, clock, leases={}, schedule_lag=1.5)
    before = _host(host.engine, host.host_id)
    assert before.stopped_at is None and before.schedule_lag_seconds == 1.5
    clock.advance(seconds=10)
    host.store.beat(host.host_id, clock, stopped=True)
    after = _host(host.engine, host.host_id)
    assert after.stopped_at is not None
    assert (after.last_seen_at, after.schedule_lag_seconds) == (
        before.last_seen_at,
        before.schedule_lag_seconds,
    )
    _, alive = host.store.hosts()
    assert host.host_id not in {h.id for h in alive}
