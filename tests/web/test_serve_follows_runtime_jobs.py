"""``jobhost serve`` follows runtime jobs as a host does, on both stores.

In process: the follower swaps a job created through the job service into the catalog the pages
read, and swaps it out again once deleted. As a process: a job created through ``serve``'s own
API appears in its ``/report`` and on its dashboard; deleted, it is no longer a scheduled job
there but the orphaned row every host's report shows ("deleted through the API by ...").
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.operations.report import build_report
from jobhost.runtime.reload import RuntimeFollower
from jobhost.runtime.service import JobService
from jobhost.store import Store, create_store_engine, upgrade
from tests.api.api_support import call, token_lines
from tests.cli.operator_support import Operator
from tests.ports import free_port
from tests.support import ManualClock
from tests.waiting import wait_for

PING = {"kind": "http", "interval": "10m", "settings": {"url": "http://127.0.0.1:9/ping"}}
JOB = "hooks.ping"


def test_the_follower_swaps_runtime_jobs_in_and_out(store_url: str) -> None:
    settings = Settings(database_url=store_url)
    engine = create_store_engine(store_url, create=True)
    upgrade(engine)
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "http"})
    service = JobService(
        settings,
        build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "http"}),
        Store(engine, ManualClock(datetime.now(UTC))),
        trigger_wait=0,
    )
    follower = RuntimeFollower(settings, catalog, Store(engine))
    follower.start()
    try:
        assert JOB not in catalog.jobs
        made = service.put(JOB, PING, actor="deployer", if_match=None)
        wait_for(lambda: JOB in catalog.jobs, 10, "the created job in serve's catalog")
        assert catalog.runtime == frozenset({JOB})
        (row,) = build_report(settings, catalog, Store(engine)).jobs
        assert (row.name, row.state) == (JOB, "enabled")

        service.delete(JOB, actor="deployer", if_match=made.etag)
        wait_for(lambda: JOB not in catalog.jobs, 10, "the deleted job leaving serve's catalog")
        assert catalog.runtime == frozenset()
        (row,) = build_report(settings, catalog, Store(engine)).jobs
        assert row.state == "orphaned"
    finally:
        follower.stop()
        engine.dispose()


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[str]:
    """``jobhost serve`` over a store with one declared job, with the test's API tokens."""
    operator = Operator(store_url, tmp_path)
    operator.configure([{"name": "sample.tick", "cron": "0 3 * * *"}])
    with operator.config.open("a") as config:
        config.write("\n".join(token_lines()) + "\n")
    operator.sync()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "jobhost", "--config", str(operator.config), "serve"]
    child = subprocess.Popen(
        [*command, "--listen", f"127.0.0.1:{port}"],
        env=operator.env(JOBHOST_LOAD_PLUGINS="http"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _answers(base), 60, "jobhost serve")
        yield base
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=15)
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        operator.close()


def test_serve_shows_a_runtime_job_created_and_deleted_while_it_runs(served: str) -> None:
    base = served
    assert _report_rows(base) == {"sample.tick": "enabled"}
    made = call(
        base, "PUT", f"/api/v1/jobs/{JOB}", token="deployer", body={**PING, "reason": "new"}
    )
    assert made.status == 201, made.body

    # The schedule row is written with the job: until serve reads the job, /report shows the
    # row as orphaned (no declaration), which is how serve used to show it for good.
    wait_for(lambda: _report_rows(base).get(JOB) == "enabled", 10, "the job in serve's /report")
    page = call(base, "GET", "/")
    assert page.status == 200 and f'data-job="{JOB}"' in page.body
    assert call(base, "GET", f"/jobs/{JOB}").status == 200

    body = {"reason": "retired"}
    gone = call(base, "DELETE", f"/api/v1/jobs/{JOB}", token="deployer", body=body)
    assert gone.status == 204
    wait_for(lambda: _report_rows(base).get(JOB) == "orphaned", 10, "the deletion in /report")
    row = _report_row(base, JOB)
    assert "deleted through the API by deployer" in json.dumps(row["mismatch"])
    listed = call(base, "GET", "/api/v1/jobs?source=api", token="reader").body["jobs"]
    assert [job["name"] for job in listed] == []


def _report_rows(base: str) -> dict[str, str]:
    report = call(base, "GET", "/report").body
    return {job["name"]: job["state"] for job in report["jobs"]}


def _report_row(base: str, name: str) -> dict[str, Any]:
    (row,) = [job for job in call(base, "GET", "/report").body["jobs"] if job["name"] == name]
    return dict(row)


def _answers(base: str) -> bool:
    try:
        return call(base, "GET", "/readyz").status == 200
    except OSError:
        return False
