"""The store side of a host, driven by hand: a replica's ticker and envelope on one test clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope
from jobhost.envelope.reporting import Telemetry
from jobhost.firing.tick import Ticker
from jobhost.records import Claim
from jobhost.store import Store, create_store_engine
from tests.migrated import migrate
from tests.support import ManualClock, run_log_writer, run_through, sample_catalog


class Replica:
    """One host's store side (ticker) and envelope, driven by hand."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        engine: Engine,
        clock: ManualClock,
        telemetry: Telemetry,
        host_id: str,
    ) -> None:
        self.catalog = catalog
        self.engine = engine
        self.store = Store(engine, clock)
        self.clock = clock
        self.host_id = host_id
        self.ticker = Ticker(
            self.store,
            catalog.jobs,
            host_id=host_id,
            lease_duration=settings.lease_duration,
            telemetry=telemetry,
            concurrency_limits=settings.concurrency_limits,
        )
        # The test's clock stands in for the database's, on PostgreSQL too.
        self.envelope = RunEnvelope(
            self.store,
            host_id=host_id,
            grace=timedelta(seconds=1),
            telemetry=telemetry,
            run_logs=run_log_writer(self.store),
            store_time=clock,
        )

    def tick(self, slots: int = 8) -> list[Claim]:
        """One turn as a host takes it: one claim, backfills last in the slots left."""
        return [claim for claim, _ in self.ticker.tick(self.clock(), slots).claims]

    def finish(self, claim: Claim) -> str:
        return run_through(self.envelope, claim, self.catalog.jobs[claim.job_name]).outcome


@pytest.fixture
def replicas(
    sample_settings: Callable[..., Settings], clock: ManualClock, telemetry: Any
) -> Iterator[Callable[..., list[Replica]]]:
    engines: list[Engine] = []

    def make(jobs: list[dict[str, Any]], count: int = 1, **values: Any) -> list[Replica]:
        settings = sample_settings(jobs, **values)
        catalog = sample_catalog(settings)
        engine = create_store_engine(settings.database_url)
        engines.append(engine)
        migrate(engine)
        made = [
            Replica(settings, catalog, engine, clock, telemetry[0], f"host-{i}")
            for i in range(count)
        ]
        made[0].ticker.sync(clock())
        return made

    yield make
    for engine in engines:
        engine.dispose()
