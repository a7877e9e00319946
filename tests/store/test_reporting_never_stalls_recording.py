"""Reporting never holds up recording: a hanging audit sink costs only its own records.

A real host on each store fires four every-second jobs while a module's audit sink never
answers. Runs are still recorded as they finish (none is skipped by the overlap rule waiting
for a record), and the JSON audit line still follows every recorded run.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from jobhost.config import Settings
from jobhost.firing.host import Host
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from tests.support import sample_catalog

JOBS = [{"name": f"sample.every-second-{i}", "interval": "1s"} for i in range(4)]
WATCH_SECONDS = 4.0


def test_a_hanging_audit_sink_never_holds_up_recording(
    sample_settings: Callable[..., Settings], telemetry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = sample_settings(JOBS, audit_sink_timeout="2s")
    settings = settings.model_copy(
        update={"modules": {"sample": {**settings.modules["sample"], "sinks": ["hang"]}}}
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    host = Host(settings, sample_catalog(settings), Store(engine), telemetry=telemetry[0])
    host.start()
    loop = threading.Thread(target=host.loop, daemon=True)
    with caplog.at_level(logging.INFO, logger="jobhost.audit"):
        loop.start()
        try:
            time.sleep(WATCH_SECONDS)  # the sink hangs in real time: so does the test
        finally:
            host.request_stop()
            loop.join(10)
            host.shutdown()
    try:
        with reading(engine) as connection:
            rows = connection.execute(select(runs.c.id, runs.c.job_name, runs.c.outcome)).all()
    finally:
        engine.dispose()
    outcomes = Counter(outcome for _, _, outcome in rows)
    per_job = Counter(job for _, job, outcome in rows if outcome == "succeeded")
    assert outcomes["skipped"] == 0, f"runs waited for a record: {outcomes}"
    assert all(per_job[job["name"]] >= 2 for job in JOBS), per_job
    audited = {
        json.loads(r.getMessage())["run_id"] for r in caplog.records if r.name == "jobhost.audit"
    }
    succeeded = {run_id for run_id, _, outcome in rows if outcome == "succeeded"}
    assert succeeded <= audited, "the audit line follows every recorded run"
