"""A heartbeat's lease renewal: what it renews, what it reports lost, and that it never waits
for a run's row another transaction holds (the recorder finishing that run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, text

from jobhost.store import ledger, reading
from jobhost.store.schema import runs
from tests.support import ManualClock

JOBS = [{"name": f"sample.minutely-{i}", "cron": "* * * * *"} for i in range(2)]


def _leases(engine: Any) -> dict[str, datetime]:
    with reading(engine) as connection:
        return dict(connection.execute(select(runs.c.id, runs.c.lease_expires_at)).all())


def test_a_renewal_extends_its_runs_and_reports_the_ones_it_no_longer_holds(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(JOBS)
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    first, second = host.tick()
    assert host.finish(second) == "succeeded"
    until = clock.now + timedelta(minutes=5)
    with host.engine.begin() as connection:
        lost = ledger.renew_leases(connection, host.host_id, [first.run_id, second.run_id], until)
    # The finished run is no longer this host's to renew; the running one is renewed.
    assert lost == {second.run_id}
    assert _leases(host.engine)[first.run_id] == until
    with host.engine.begin() as connection:
        assert ledger.renew_leases(connection, "another-host", [first.run_id], until) == {
            first.run_id
        }


@pytest.mark.parametrize(
    "store_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_renewal_leaves_a_row_another_transaction_holds_and_loses_nothing(
    replicas: Any, clock: ManualClock
) -> None:
    # Row locks are PostgreSQL's: an SQLite transaction holds the whole store.
    (host,) = replicas(JOBS)
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    held, free = host.tick()
    before = _leases(host.engine)[held.run_id]
    until = clock.now + timedelta(minutes=5)
    with host.engine.connect() as recorder:
        # Another transaction holds one run's row, as the recorder does while it finishes it.
        recorder.execute(select(runs.c.id).where(runs.c.id == held.run_id).with_for_update())
        with host.engine.begin() as connection:
            # Waiting for the row would fail here, not hang the test.
            connection.execute(text("SET LOCAL lock_timeout = '2s'"))
            lost = ledger.renew_leases(connection, host.host_id, [held.run_id, free.run_id], until)
        recorder.rollback()
    assert lost == set(), "a run whose row was held is still this host's"
    leases = _leases(host.engine)
    assert leases[free.run_id] == until
    assert leases[held.run_id] == before, "left for the next beat"
    with host.engine.begin() as connection:
        assert ledger.renew_leases(connection, host.host_id, [held.run_id], until) == set()
    assert _leases(host.engine)[held.run_id] == until
