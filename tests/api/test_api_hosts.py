"""The API against two real ``jobhost run`` replicas on one store, SQLite and PostgreSQL.

An HTTP job is created through the API, fires (the target server sees the calls), is paused
and resumed, has its trigger changed (every replica's API shows the new next fire), is
triggered by hand, refuses a stale If-Match, and is removed; the change log says who did what.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from jobhost.records import HostRecord, RunRecord
from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.ledger import list_hosts
from jobhost.store.schema import runs
from tests.api.api_support import call, host_env, ready, write_config
from tests.modules.http.http_support import serve
from tests.ports import free_port
from tests.process.conftest import HostProcess
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

JOB = "hooks.ping"
YEARLY = "0 0 1 1 *"


def job_runs(url: str) -> list[RunRecord]:
    engine = create_store_engine(url)
    try:
        with reading(engine) as connection:
            rows = connection.execute(
                select(runs).where(runs.c.job_name == JOB).order_by(runs.c.queued_at)
            ).mappings()
            return [RunRecord.from_row(r) for r in rows]
    finally:
        engine.dispose()


def _running(url: str) -> list[RunRecord]:
    return [x for x in job_runs(url) if x.outcome in ("running", "pending")]


def _hosts(url: str) -> list[HostRecord]:
    engine = create_store_engine(url)
    try:
        with reading(engine) as connection:
            return [h for h in list_hosts(connection) if h.stopped_at is None]
    finally:
        engine.dispose()


def succeeded(url: str) -> list[RunRecord]:
    return [r for r in job_runs(url) if r.outcome == "succeeded"]


@dataclass
class Replicas:
    store_url: str
    bases: list[str]
    hosts: list[HostProcess]
    definition: dict[str, Any]


def test_create_fire_change_pause_trigger_and_delete_on_every_replica(
    store_url: str, tmp_path: Path
) -> None:
    engine = create_store_engine(store_url)
    upgrade(engine)
    engine.dispose()
    config = write_config(
        tmp_path / "jobhost.toml", store_url, poll_interval="1s", heartbeat_interval="1s"
    )
    ports = [free_port(), free_port()]
    hosts = [
        HostProcess(f"api-{i}", config, tmp_path / f"api-{i}.log", host_env(f"api-{i}", port))
        for i, port in enumerate(ports)
    ]
    try:
        with serve() as target:
            bases = [f"http://127.0.0.1:{port}" for port in ports]
            for base in bases:
                wait_for(lambda b=base: ready(b), 30, "readiness")
            definition = {
                "kind": "http",
                "cron": "* * * * * *",
                "description": "ping the target every second",
                "settings": {"url": f"{target.base}/ok", "method": "POST"},
                "reason": "ping the target",
            }
            replicas = Replicas(store_url, bases, hosts, definition)
            etag = _create_and_fire(replicas)
            assert any(r.path == "/ok" and r.method == "POST" for r in target.received)
            _pause_and_resume(replicas)
            etag = _change_the_trigger(replicas, etag)
            request_id = _trigger(replicas)
            _refusals(replicas)
            _delete(replicas)
            _change_log(replicas, request_id)
    finally:
        for host in hosts:
            host.stop()


def _create_and_fire(r: Replicas) -> str:
    """Created by one replica's API; fires on the engine; both replicas learn of it."""
    a = r.bases[0]
    made = call(a, "PUT", f"/api/v1/jobs/{JOB}", token="deployer", body=r.definition)
    assert made.status == 201, made.body
    etag = made.headers["etag"]
    assert made.body["source"] == "api" and made.body["etag"] == etag
    wait_for(lambda: len(succeeded(r.store_url)) >= 2, 30, "two successful runs")
    for host, base in zip(r.hosts, r.bases, strict=True):
        wait_for(lambda h=host: "runtime jobs reloaded" in h.log(), 10, "a reload")
        shown = call(base, "GET", f"/api/v1/jobs/{JOB}", token="reader")
        assert shown.status == 200 and shown.body["source"] == "api"
        assert shown.body["effective_trigger"]["source"] == "api"
        assert shown.headers["etag"] == etag
    return etag


def _pause_and_resume(r: Replicas) -> None:
    """No run starts while paused; the missed occurrences are recorded."""
    a, b = r.bases
    paused = call(b, "POST", f"/api/v1/jobs/{JOB}/pause", token="deployer", body={"reason": "m"})
    assert paused.status == 200 and paused.body["changed"] is True
    # A run claimed just before the pause may still finish.
    wait_for(lambda: not _running(r.store_url), 15, "runs claimed before the pause to finish")
    before = len(succeeded(r.store_url))
    wait_for(lambda: any(x.reason == "paused" for x in job_runs(r.store_url)), 15, "missed rows")
    assert len(succeeded(r.store_url)) == before
    resumed = call(a, "POST", f"/api/v1/jobs/{JOB}/resume", token="deployer", body={"reason": "k"})
    assert resumed.status == 200 and resumed.body["changed"] is True
    wait_for(lambda: len(succeeded(r.store_url)) > before, 15, "runs after the resume")


def _change_the_trigger(r: Replicas, etag: str) -> str:
    """The next fire moves on every replica, and the runs stop; a stale If-Match is refused."""
    a, b = r.bases
    body = {**r.definition, "cron": YEARLY}
    reloads = [host.log().count("runtime jobs reloaded") for host in r.hosts]
    changed = call(
        b, "PUT", f"/api/v1/jobs/{JOB}", token="deployer", body=body, headers={"If-Match": etag}
    )
    assert changed.status == 200, changed.body
    assert changed.headers["etag"] != etag
    year = time.gmtime().tm_year + 1
    for base in r.bases:
        shown = call(base, "GET", f"/api/v1/jobs/{JOB}", token="reader").body
        assert shown["next_fire_utc"] == f"{year}-01-01T00:00:00Z"
        assert shown["effective_trigger"]["expression"] == YEARLY
    for host, before in zip(r.hosts, reloads, strict=True):
        wait_for(
            lambda h=host, n=before: h.log().count("runtime jobs reloaded") > n,
            15,
            "every host to reload the changed job",
        )
    wait_for(lambda: not _running(r.store_url), 15, "runs claimed before the change to finish")
    # Every host fires by the yearly trigger now: while each goes on for two more heartbeats,
    # no run of the job starts.
    settled = len(job_runs(r.store_url))
    quiet_from = datetime.now(UTC) + timedelta(seconds=2)
    wait_for(
        lambda: all(h.last_seen_at >= quiet_from for h in _hosts(r.store_url)),
        15,
        "every host to go on for two more seconds",
    )
    assert len(job_runs(r.store_url)) == settled
    stale = call(
        a,
        "PUT",
        f"/api/v1/jobs/{JOB}",
        token="deployer",
        body=r.definition,
        headers={"If-Match": etag},
    )
    assert stale.status == 412 and stale.content_type == "application/problem+json"
    assert changed.headers["etag"] in stale.body["detail"]
    return str(changed.headers["etag"])


def _trigger(r: Replicas) -> str:
    """202 with the request (and run) id; that run succeeds and is in the job's history."""
    a = r.bases[0]
    triggered = call(
        a, "POST", f"/api/v1/jobs/{JOB}/trigger", token="ops", body={"reason": "check"}
    )
    assert triggered.status == 202, triggered.body
    manual = wait_for(
        lambda: [x for x in succeeded(r.store_url) if x.source == "manual"], 15, "a manual run"
    )
    assert manual[0].requested_by == "ops"
    history = call(a, "GET", f"/api/v1/jobs/{JOB}/runs?outcome=succeeded", token="reader")
    answered = {x["run_id"]: x for x in history.body["runs"]}
    assert manual[0].id in answered
    # What the executor returned, as the ledger keeps it.
    assert json.dumps(answered[manual[0].id]["result"], separators=(",", ":")) == manual[0].result
    return str(triggered.body["request_id"])


def _refusals(r: Replicas) -> None:
    """No token 401, a token without the scope 403; oversized, malformed and unknown bodies."""
    a = r.bases[0]
    path = f"/api/v1/jobs/{JOB}"
    assert call(a, "GET", "/api/v1/jobs").status == 401
    assert call(a, "GET", "/api/v1/jobs", token="not-a-token-at-all").status == 401
    refused = call(a, "DELETE", path, token="reader")
    assert refused.status == 403 and "write" in refused.body["detail"]
    assert call(a, "POST", f"{path}/trigger", token="deployer", body={"reason": "x"}).status == 403
    big = call(a, "PUT", path, token="deployer", raw=b'{"kind": "' + b"x" * 70_000 + b'"}')
    assert big.status == 413 and big.content_type == "application/problem+json"
    bad = call(a, "PUT", path, token="deployer", raw=b'{"kind": ')
    assert bad.status == 400 and "line 1" in bad.body["detail"]
    unknown = call(a, "PUT", path, token="deployer", body={**r.definition, "colour": "red"})
    assert unknown.status == 422 and unknown.body["errors"][0]["field"] == "colour"


def _delete(r: Replicas) -> None:
    path = f"/api/v1/jobs/{JOB}"
    unsaid = call(r.bases[1], "DELETE", path, token="deployer", body={})
    assert unsaid.status == 422 and unsaid.body["errors"][0]["field"] == "reason"
    gone = call(r.bases[1], "DELETE", path, token="deployer", body={"reason": "done"})
    assert gone.status == 204
    for base in r.bases:
        gone = call(base, "GET", f"/api/v1/jobs/{JOB}", token="reader")
        assert gone.status == 404 and "deleted through the API by deployer" in gone.body["detail"]
        assert call(base, "GET", f"/api/v1/jobs/{JOB}/runs", token="reader").status == 200
        listed = call(base, "GET", "/api/v1/jobs?source=api", token="reader").body["jobs"]
        assert JOB not in [job["name"] for job in listed]


def _change_log(r: Replicas, request_id: str) -> None:
    changes = call(r.bases[0], "GET", f"/api/v1/changes?job={JOB}", token="reader").body
    found = changes["changes"]
    assert [(c["action"], c["actor"]) for c in found] == [
        ("create", "deployer"),
        ("pause", "deployer"),
        ("resume", "deployer"),
        ("change", "deployer"),
        ("trigger", "ops"),
        ("delete", "deployer"),
    ]
    assert found[3]["before"]["cron"] == "* * * * * *"
    assert found[3]["after"]["cron"] == YEARLY
    assert found[4]["after"] == {"request_id": request_id}
