"""A rolling deploy: two replicas running different catalogs on one PostgreSQL store.

The newest catalog to start writes its triggers; every replica then fires by the store's
trigger, nobody rewrites a schedule on a turn of the loop, a job only the new catalog declares
is left to the new replica, and every occurrence runs once or is recorded with a reason.
"""

from __future__ import annotations

import itertools
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from jobhost.records import ScheduleRecord
from jobhost.store import reading
from jobhost.store.ledger import list_hosts
from jobhost.store.reports import get_schedule
from tests.process.conftest import ledger
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

OLD = [
    {"name": "sample.tick", "interval": "2s"},
    {"name": "sample.steady", "cron": "* * * * * *"},
]
NEW = [
    {"name": "sample.tick", "interval": "3s"},
    {"name": "sample.steady", "cron": "* * * * * *"},
    {"name": "sample.added", "interval": "1s"},
]


def test_a_rolling_deploy_with_two_catalogs_loses_no_occurrence(cluster: Any) -> None:
    engine, (old,) = cluster(OLD, hosts=[{"JOBHOST_HOST_ID": "old"}], heartbeat_interval="1s")
    wait_for(lambda: _ran(engine, "sample.tick") >= 2, 30, "the old catalog to run sample.tick")
    _, (new,) = cluster(NEW, hosts=[{"JOBHOST_HOST_ID": "new"}], heartbeat_interval="1s")
    wait_for(lambda: _synced(engine, "new"), 30, "the new replica to write its catalog")
    synced = _schedule(engine, "sample.tick")
    assert synced.trigger_expression == "3s"
    wait_for(
        lambda: (
            _since(engine, "sample.tick", synced.updated_at) >= 4
            and _since(engine, "sample.steady", synced.updated_at) >= 10
        ),
        40,
        "four ticks and ten steady seconds after the new catalog's sync",
    )
    for host in (old, new):
        host.signal(signal.SIGTERM)
    for host in (old, new):
        assert host.wait(30) == 0, host.log()

    # Nobody rewrote the schedule after the new catalog's sync.
    after = _schedule(engine, "sample.tick")
    assert (after.trigger_expression, after.updated_at) == ("3s", synced.updated_at)
    hosts = {h.id: h for h in _hosts(engine)}
    assert hosts["old"].catalog_version != hosts["new"].catalog_version

    rows = ledger(engine)
    sync_at = synced.updated_at
    ticks = sorted(
        r.occurrence
        for r in rows
        if r.job_name == "sample.tick" and r.occurrence and r.occurrence > sync_at
    )
    assert len(ticks) >= 3, "the changed job kept running on the stored trigger"
    assert all(b - a == timedelta(seconds=3) for a, b in itertools.pairwise(ticks))
    assert {r.host_id for r in rows if r.job_name == "sample.added" and r.attempt} == {"new"}

    # Every second of the steady job in the window ran once, or is recorded with a reason.
    first = sync_at + timedelta(seconds=2)
    last = max(r.occurrence for r in rows if r.occurrence) - timedelta(seconds=3)
    steady = [
        r
        for r in rows
        if r.job_name == "sample.steady" and r.occurrence and first <= r.occurrence <= last
    ]
    per_second = Counter(r.occurrence for r in steady if r.attempt >= 1)
    assert set(per_second.values()) == {1}, "an occurrence ran twice"
    accounted = {r.occurrence for r in steady if r.attempt >= 1 or r.reason}
    start = first.replace(microsecond=0) + timedelta(seconds=1)
    expected = set(itertools.takewhile(lambda t: t <= last, _seconds_from(start)))
    assert len(expected) >= 5
    assert expected - accounted == set(), (
        "\n".join(
            f"{r.occurrence:%H:%M:%S.%f} {r.outcome} {r.host_id} {r.reason} {r.started_at}"
            for r in rows
            if r.job_name == "sample.steady" and r.occurrence
        )
        + f"\nsync {sync_at}"
    )


def _seconds_from(start: datetime) -> Iterator[datetime]:
    return (start + timedelta(seconds=i) for i in itertools.count())


def _since(engine: Engine, job: str, at: datetime) -> int:
    """Occurrences of ``job`` after ``at`` that have a row."""
    return len(
        {
            r.occurrence
            for r in ledger(engine)
            if r.job_name == job and r.occurrence and r.occurrence > at
        }
    )


def _ran(engine: Engine, job: str) -> int:
    return len([r for r in ledger(engine) if r.job_name == job and r.outcome == "succeeded"])


def _synced(engine: Engine, host_id: str) -> bool:
    return any(h.id == host_id and h.synced_at is not None for h in _hosts(engine))


def _hosts(engine: Engine) -> list[Any]:
    with reading(engine) as connection:
        return list_hosts(connection)


def _schedule(engine: Engine, job: str) -> ScheduleRecord:
    with reading(engine) as connection:
        row = get_schedule(connection, job)
    assert row is not None
    return row
