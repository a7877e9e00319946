"""What a host writes on its own row and its runs besides claims and outcomes: the catalog it
last wrote, its heartbeat (with the runs stuck in code that ignored cancellation), and its last
beat, which says it stopped."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from jobhost.records import HostRecord
from jobhost.store import ledger, reading
from jobhost.store.schema import hosts, runs
from tests.support import ManualClock

JOBS = [{"name": f"sample.minutely-{i}", "cron": "* * * * *"} for i in range(3)]
STUCK = "stuck: timed out after 1s; its thread still runs"


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


def _errors(engine: Any) -> dict[str, tuple[str | None, str | None]]:
    with reading(engine) as connection:
        query = select(runs.c.id, runs.c.error_type, runs.c.error_message)
        return {run_id: (kind, message) for run_id, kind, message in connection.execute(query)}


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


def test_a_beat_says_stuck_the_runs_still_this_hosts_and_keeps_their_leases(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    _register(host)
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    stuck, finished, running = host.tick()
    assert host.finish(finished) == "succeeded"
    lease = timedelta(minutes=5)
    beat = host.store.beat(
        host.host_id,
        clock,
        leases={lease: [stuck.run_id, running.run_id]},
        stuck={stuck.run_id: STUCK, finished.run_id: STUCK},
    )
    assert beat.lost == set()
    errors = _errors(host.engine)
    assert errors[stuck.run_id] == ("Stuck", STUCK)
    assert errors[finished.run_id] == (None, None), "a recorded run is not stuck"
    assert errors[running.run_id] == (None, None)
    # Another host's beat says nothing of this host's runs.
    host.store.beat("host-other", clock, stuck={running.run_id: STUCK})
    assert _errors(host.engine)[running.run_id] == (None, None)
    with reading(host.engine) as connection:
        query = select(runs.c.lease_expires_at).where(runs.c.id == stuck.run_id)
        renewed = connection.execute(query).scalar()
    assert renewed is not None and renewed > clock()


@pytest.mark.parametrize(
    "store_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_stuck_run_whose_row_another_transaction_holds_is_said_by_the_next_beat(
    replicas: Any, clock: ManualClock
) -> None:
    # Row locks are PostgreSQL's: an SQLite transaction holds the whole store.
    (host,) = replicas(JOBS)
    _register(host)
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    held, *_ = host.tick()
    with host.engine.connect() as recorder:
        # Another transaction holds the run's row, as the recorder does while it finishes it.
        recorder.execute(select(runs.c.id).where(runs.c.id == held.run_id).with_for_update())
        beat = threading.Thread(
            target=lambda: host.store.beat(host.host_id, clock, stuck={held.run_id: STUCK})
        )
        beat.start()
        beat.join(5)
        waited = beat.is_alive()
        recorder.rollback()
        beat.join()
    assert not waited, "the beat waited for a row another transaction held"
    assert _errors(host.engine)[held.run_id] == (None, None), "left for the next beat"
    host.store.beat(host.host_id, clock, stuck={held.run_id: STUCK})
    assert _errors(host.engine)[held.run_id] == ("Stuck", STUCK)


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
    alive = host.store.health_rows(hosts="alive")[1].hosts
    assert host.host_id not in {h.id for h in alive}
