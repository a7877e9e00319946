"""What a running host made at start-up (its catalog above all) is left out of the cyclic
collector's walks: a full collection while it fires walks only what firing made since, not
every job's declaration again, so its pause does not grow with the catalog."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.store import Store, create_store_engine, upgrade
from tests.support import sample_catalog
from tests.waiting import wait_for


def test_a_running_host_leaves_its_catalog_out_of_the_collectors_walks(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> None:
    jobs = [{"name": f"sample.job-{i}", "interval": "1h"} for i in range(20)]
    settings = sample_settings(jobs)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    catalog = sample_catalog(settings)
    spec = catalog.jobs["sample.job-7"]
    assert gc.is_tracked(spec)
    host = Host(settings, catalog, Store(engine), telemetry=telemetry[0])
    thread = threading.Thread(target=host.run_forever, kwargs={"install_signals": False})
    thread.start()
    try:
        wait_for(lambda: host.status.synced or None, 30, "the host synced", every=0.05)
        wait_for(
            lambda: not any(tracked is spec for tracked in gc.get_objects()) or None,
            10,
            "the catalog out of the collector's generations",
            every=0.05,
        )
        assert thread.is_alive()
    finally:
        host.request_stop()
        thread.join(30)
        gc.unfreeze()
        engine.dispose()
    assert not thread.is_alive()
