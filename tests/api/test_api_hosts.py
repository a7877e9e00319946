"""The API against two real ``jobhost run`` replicas on one store, SQLite and PostgreSQL.

An HTTP job is created through the API, fires (the target server sees the calls), is paused
and resumed, has its trigger changed (every replica's API shows the new next fire), is
triggered by hand, refuses a stale If-Match, and is removed; the change log says who did what.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from jobhost.store import RunRecord, create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from tests.api.api_support import call, free_port, host_env, ready, write_config
from tests.modules.http.http_support import serve
from tests.process.conftest import HostProcess, wait_for

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


def succeeded(url: str) -> list[RunRecord]:
    return [r for r in job_runs(url) if r.outcome == "succeeded"]


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
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    hosts = [
        HostProcess(f"api-{i}", config, tmp_path / f"api-{i}.log", host_env(f"api-{i}", port))
        for i, port in enumerate(ports)
    ]
    try:
        with serve() as target:
            for base in bases:
                wait_for(lambda b=base: ready(b), 30, "readiness")
            a, b = bases

            # Created by one replica's API; fires (the target is called) on the engine.
            definition = {
                "kind": "http",
                "cron": "* * * * * *",
                "description": "ping the target every second",
                "settings": {"url": f"{target.base}/ok", "method": "POST"},
            }
            made = call(a, "PUT", f"/api/v1/jobs/{JOB}", token="deployer", body=definition)
            assert made.status == 201, made.body
            etag = made.headers["etag"]
            assert made.body["source"] == "api" and made.body["etag"] == etag
            wait_for(lambda: len(succeeded(store_url)) >= 2, 30, "two successful runs")
            assert any(r.path == "/ok" and r.method == "POST" for r in target.received)
            # Both replicas learnt of it (each log says so) and both APIs show it, source api.
            for index, base in enumerate(bases):
                wait_for(lambda i=index: "runtime jobs reloaded" in hosts[i].log(), 10, "a reload")
                shown = call(base, "GET", f"/api/v1/jobs/{JOB}", token="reader")
                assert shown.status == 200 and shown.body["source"] == "api"
                assert shown.body["effective_trigger"]["source"] == "api"
                assert shown.headers["etag"] == etag

            # Pause: no run starts while paused; the missed occurrences are recorded.
            paused = call(
                b, "POST", f"/api/v1/jobs/{JOB}/pause", token="deployer", body={"reason": "maint"}
            )
            assert paused.status == 200 and paused.body["changed"] is True
            time.sleep(1.5)  # a run claimed just before the pause may still finish
            before = len(succeeded(store_url))
            wait_for(
                lambda: any(r.reason == "paused" for r in job_runs(store_url)), 15, "missed rows"
            )
            assert len(succeeded(store_url)) == before
            resumed = call(
                a, "POST", f"/api/v1/jobs/{JOB}/resume", token="deployer", body={"reason": "ok"}
            )
            assert resumed.status == 200 and resumed.body["changed"] is True
            wait_for(lambda: len(succeeded(store_url)) > before, 15, "runs after the resume")

            # Change the trigger: the next fire moves on every replica, and the runs stop.
            changed = call(
                b,
                "PUT",
                f"/api/v1/jobs/{JOB}",
                token="deployer",
                body={**definition, "cron": YEARLY},
                headers={"If-Match": etag},
            )
            assert changed.status == 200, changed.body
            assert changed.headers["etag"] != etag
            year = time.gmtime().tm_year + 1
            for base in bases:
                shown = call(base, "GET", f"/api/v1/jobs/{JOB}", token="reader").body
                assert shown["next_fire_utc"] == f"{year}-01-01T00:00:00Z"
                assert shown["effective_trigger"]["expression"] == YEARLY
            time.sleep(1.5)
            settled = len(job_runs(store_url))
            time.sleep(2)
            assert len(job_runs(store_url)) == settled

            # A stale If-Match is refused, and nothing changes.
            stale = call(
                a,
                "PUT",
                f"/api/v1/jobs/{JOB}",
                token="deployer",
                body=definition,
                headers={"If-Match": etag},
            )
            assert stale.status == 412 and stale.content_type == "application/problem+json"
            assert changed.headers["etag"] in stale.body["detail"]

            # Trigger by hand: 202 with the run id, and that run succeeds.
            triggered = call(
                a, "POST", f"/api/v1/jobs/{JOB}/trigger", token="ops", body={"reason": "check"}
            )
            assert triggered.status == 202, triggered.body
            request_id = triggered.body["request_id"]
            manual = wait_for(
                lambda: [r for r in succeeded(store_url) if r.source == "manual"], 15, "manual run"
            )
            assert manual[0].requested_by == "ops"
            history = call(a, "GET", f"/api/v1/jobs/{JOB}/runs?outcome=succeeded", token="reader")
            assert manual[0].id in [r["run_id"] for r in history.body["runs"]]

            # Access: no token 401, a token without the scope 403.
            assert call(a, "GET", "/api/v1/jobs").status == 401
            assert call(a, "GET", "/api/v1/jobs", token="not-a-token-at-all").status == 401
            refused = call(a, "DELETE", f"/api/v1/jobs/{JOB}", token="reader")
            assert refused.status == 403 and "write" in refused.body["detail"]
            assert (
                call(
                    a, "POST", f"/api/v1/jobs/{JOB}/trigger", token="deployer", body={"reason": "x"}
                ).status
                == 403
            )

            # Oversized and malformed bodies.
            big = call(
                a,
                "PUT",
                f"/api/v1/jobs/{JOB}",
                token="deployer",
                raw=b'{"kind": "' + b"x" * 70_000 + b'"}',
            )
            assert big.status == 413 and big.content_type == "application/problem+json"
            bad = call(a, "PUT", f"/api/v1/jobs/{JOB}", token="deployer", raw=b'{"kind": ')
            assert bad.status == 400 and "line 1" in bad.body["detail"]
            unknown = call(
                a,
                "PUT",
                f"/api/v1/jobs/{JOB}",
                token="deployer",
                body={**definition, "colour": "red"},
            )
            assert unknown.status == 422
            assert unknown.body["errors"][0]["field"] == "colour"

            # A declared job cannot be removed; the runtime job can, on any replica.
            gone = call(b, "DELETE", f"/api/v1/jobs/{JOB}", token="deployer")
            assert gone.status == 204
            for base in bases:
                assert call(base, "GET", f"/api/v1/jobs/{JOB}/runs", token="reader").status == 200
                names = [
                    j["name"]
                    for j in call(base, "GET", "/api/v1/jobs?source=api", token="reader").body[
                        "jobs"
                    ]
                ]
                assert JOB not in names

            changes = call(a, "GET", f"/api/v1/changes?job={JOB}", token="reader").body["changes"]
            assert [(c["action"], c["actor"]) for c in changes] == [
                ("create", "deployer"),
                ("pause", "deployer"),
                ("resume", "deployer"),
                ("change", "deployer"),
                ("trigger", "ops"),
                ("delete", "deployer"),
            ]
            assert changes[3]["before"]["cron"] == "* * * * * *"
            assert changes[3]["after"]["cron"] == YEARLY
            assert changes[4]["after"] == {"request_id": request_id}
    finally:
        for host in hosts:
            host.stop()
