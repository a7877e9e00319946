"""A run's state writes are fenced by its own lease, on both backends.

Under ``overlap = "allow"`` a newer run of the job does not stop an older live one from writing;
a run recorded abandoned (its lease expired, another replica took over) can no longer write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobhost_contracts import StaleLeaseError
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.config import Settings
from jobhost.firing.tick import Ticker
from jobhost.records import Claim
from jobhost.store import Store, StoreJobState, create_store_engine, ledger, reading, upgrade
from jobhost.store.schema import job_idempotency, runs
from tests.support import ManualClock, sample_catalog

JOB = "sample.minutely"


class _Host:
    """One replica's claiming side, driven by hand with the test's clock."""

    def __init__(
        self, engine: Engine, settings: Settings, host_id: str, clock: ManualClock, telemetry: Any
    ) -> None:
        self.engine = engine
        self.host_id = host_id
        self.clock = clock
        self.ticker = Ticker(
            Store(engine),
            sample_catalog(settings).jobs,
            host_id=host_id,
            lease_duration=settings.lease_duration,
            telemetry=telemetry,
        )

    def tick(self) -> list[Claim]:
        return [claim for claim, _ in self.ticker.tick(self.clock(), 8).claims]

    def state(self, claim: Claim) -> StoreJobState:
        return StoreJobState(
            self.engine,
            claim.job_name,
            claim.fencing_token,
            self.clock,
            run_id=claim.run_id,
            host_id=self.host_id,
            # The test's clock stands in for the database's, on PostgreSQL too.
            store_time=self.clock,
        )


@pytest.fixture
def hosts(
    sample_settings: Callable[..., Settings], clock: ManualClock, telemetry: Any
) -> Iterator[Callable[..., list[_Host]]]:
    engines: list[Engine] = []

    def make(job: dict[str, Any], count: int, **values: Any) -> list[_Host]:
        settings = sample_settings([job], **values)
        engine = create_store_engine(settings.database_url)
        engines.append(engine)
        upgrade(engine)
        made = [_Host(engine, settings, f"host-{i}", clock, telemetry[0]) for i in range(count)]
        made[0].ticker.sync(clock())
        return made

    yield make
    for engine in engines:
        engine.dispose()


def _at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, 10, minute, second, tzinfo=UTC)


def _recorded(engine: Engine) -> dict[str, str | None]:
    with reading(engine) as connection:
        rows = connection.execute(select(job_idempotency.c.key, job_idempotency.c.run_id))
        return {key: run_id for key, run_id in rows}


def _outcome(engine: Engine, run_id: str) -> str:
    with reading(engine) as connection:
        return str(connection.execute(select(runs.c.outcome).where(runs.c.id == run_id)).scalar())


def test_the_older_run_under_overlap_allow_keeps_writing(hosts: Any, clock: ManualClock) -> None:
    job = {"name": JOB, "cron": "* * * * *", "overlap": "allow", "max_concurrent": 2}
    (host,) = hosts(job, 1)
    clock.now = _at(0, 1)
    (older,) = host.tick()
    clock.now = _at(1, 1)
    (newer,) = host.tick()
    assert newer.fencing_token > older.fencing_token

    host.state(newer).set("cursor", "newer")
    host.state(older).set("cursor", "older")
    assert host.state(older).record("unit-a")
    assert host.state(newer).record("unit-b")

    assert host.state(newer).get("cursor") == "older"
    assert _recorded(host.engine) == {"unit-a": older.run_id, "unit-b": newer.run_id}


def test_an_abandoned_run_can_no_longer_write(hosts: Any, clock: ManualClock) -> None:
    job = {"name": JOB, "cron": "* * * * *"}
    first, second = hosts(job, 2, lease_duration="10s")
    clock.now = _at(0, 1)
    (dead,) = first.tick()
    first.state(dead).set("cursor", "before")

    # The lease runs out; the other replica records the run abandoned and takes the next one.
    clock.now = _at(1, 1)
    (taken,) = second.tick()
    assert _outcome(first.engine, dead.run_id) == "abandoned"

    with pytest.raises(StaleLeaseError, match="recorded abandoned") as caught:
        first.state(dead).set("cursor", "stale")
    assert caught.value.run_id == dead.run_id
    with pytest.raises(StaleLeaseError):
        first.state(dead).record("unit-a")

    second.state(taken).set("cursor", "after")
    assert second.state(taken).get("cursor") == "after"
    assert _recorded(first.engine) == {}


def test_a_run_whose_lease_expired_is_refused_before_anyone_records_it(
    hosts: Any, clock: ManualClock
) -> None:
    (host,) = hosts({"name": JOB, "cron": "* * * * *"}, 1, lease_duration="10s")
    clock.now = _at(0, 1)
    (claim,) = host.tick()
    clock.now = _at(0, 1) + timedelta(seconds=30)
    with pytest.raises(StaleLeaseError, match="lease expired"):
        host.state(claim).record("unit-a")
    assert _recorded(host.engine) == {}


def test_another_hosts_state_for_the_run_is_refused(hosts: Any, clock: ManualClock) -> None:
    first, second = hosts({"name": JOB, "cron": "* * * * *"}, 2)
    clock.now = _at(0, 1)
    (claim,) = first.tick()
    with pytest.raises(StaleLeaseError, match="held by host host-0"):
        second.state(claim).set("cursor", "x")
    first.state(claim).set("cursor", "x")


def test_a_write_racing_the_abandonment_waits_for_it_and_is_refused(
    hosts: Any, clock: ManualClock
) -> None:
    first, second = hosts({"name": JOB, "cron": "* * * * *"}, 2, lease_duration="10s")
    clock.now = _at(0, 1)
    (claim,) = first.tick()
    # The writer still believes its lease is live; the other replica has already judged it dead.
    writer_state = StoreJobState(
        first.engine,
        claim.job_name,
        claim.fencing_token,
        clock,
        run_id=claim.run_id,
        host_id=first.host_id,
        store_time=lambda: _at(0, 5),
    )
    refused: list[BaseException] = []

    def write() -> None:
        try:
            writer_state.set("cursor", "racing")
        except StaleLeaseError as error:
            refused.append(error)

    writer = threading.Thread(target=write)
    with second.engine.begin() as connection:
        (abandoned,) = ledger.abandon_expired_runs(
            connection, _at(0, 30), implausible=timedelta(minutes=4)
        )
        assert abandoned.id == claim.run_id
        writer.start()
        writer.join(0.5)
        # The run row is locked by the abandonment: the write waits instead of slipping in.
        assert writer.is_alive()
    writer.join(10)
    assert len(refused) == 1 and "recorded abandoned" in str(refused[0])
    assert first.state(claim).get("cursor") is None


@pytest.mark.parametrize(("retry_on", "retried"), [("failed,abandoned", True), ("failed", False)])
def test_an_abandoned_run_is_retried_when_its_policy_says_so(
    hosts: Any, clock: ManualClock, retry_on: str, retried: bool
) -> None:
    job = {
        "name": JOB,
        "cron": "0 12 * * *",
        "max_attempts": 2,
        "retry_on": retry_on,
        "backoff": "1s",
        "jitter": 0,
    }
    first, second = hosts(job, 2, lease_duration="10s")
    clock.now = datetime(2026, 5, 4, 12, 0, 1, tzinfo=UTC)
    (dead,) = first.tick()
    clock.now += timedelta(seconds=30)
    assert second.tick() == []  # records the run abandoned; a retry waits for its backoff
    assert _outcome(first.engine, dead.run_id) == "abandoned"
    clock.now += timedelta(seconds=2)
    taken = second.tick()
    if not retried:
        assert taken == []
        return
    (retry,) = taken
    assert (retry.attempt, retry.source, retry.occurrence) == (2, "retry", dead.occurrence)
    assert retry.idempotency_key == dead.idempotency_key
