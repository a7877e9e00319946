"""``GET /api/v1/jobs/{name}/state`` (scope read) and ``PUT`` / ``DELETE
/api/v1/jobs/{name}/state/{key}`` (scope write): a job's durable state as ``jobhost state``
reads and changes it, with the token's name in the change log; refused while a run of the job
runs; both stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobhost.store import Store
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from tests.api.api_support import call, token_lines
from tests.cli.operator_support import Operator, now

JOB = "sample.counter"
STATE = f"/api/v1/jobs/{JOB}/state"


@pytest.fixture
def api(store_url: str, tmp_path: Path) -> Iterator[tuple[str, Operator]]:
    operator = Operator(store_url, tmp_path)
    operator.configure([{"name": JOB, "cron": "0 3 * * *", "behaviour": "state"}])
    with operator.config.open("a") as config:
        config.write("\n".join(token_lines()) + "\n")
    operator.sync()
    settings, catalog = operator.settings, operator.catalog()
    app = create_app(
        store_endpoints(settings, catalog, Store(operator.engine)),
        routes=api_routes(settings, catalog, Store(operator.engine)),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}", operator
    finally:
        server.stop()
        operator.close()


def _keys(base: str) -> dict[str, Any]:
    answer = call(base, "GET", STATE, token="reader")
    assert answer.status == 200, answer.body
    return {e["key"]: e["value"] for e in answer.body["state"]}


def test_state_is_read_set_and_deleted_with_the_token_as_actor(
    api: tuple[str, Operator],
) -> None:
    base, _ = api
    assert call(base, "GET", STATE, token="reader").body == {"job": JOB, "state": [], "more": False}
    body = {"value": "10", "reason": "replay INC-7"}
    assert call(base, "PUT", f"{STATE}/count", token="reader", body=body).status == 403

    done = call(base, "PUT", f"{STATE}/count", token="deployer", body=body)
    assert done.status == 200, done.body
    assert done.body == {"job": JOB, "key": "count", "before": None, "after": "10", "changed": True}
    assert _keys(base) == {"count": "10"}
    again = call(base, "PUT", f"{STATE}/count", token="deployer", body=body)
    assert again.body["changed"] is False

    removed = call(base, "DELETE", f"{STATE}/count", token="deployer", body={"reason": "over"})
    assert removed.status == 200 and removed.body["before"] == "10"
    absent = call(base, "DELETE", f"{STATE}/count", token="deployer", body={"reason": "over"})
    assert absent.status == 404
    changes = call(base, "GET", f"/api/v1/changes?job={JOB}", token="reader").body["changes"]
    assert [(c["action"], c["actor"], c["reason"]) for c in changes] == [
        ("state-set", "deployer", "replay INC-7"),
        ("state-delete", "deployer", "over"),
    ]


def test_bad_bodies_unknown_jobs_and_live_runs_are_refused(api: tuple[str, Operator]) -> None:
    base, operator = api
    path = f"{STATE}/count"
    assert call(base, "PUT", path, token="deployer", body={"value": "1"}).status == 422
    assert call(base, "PUT", path, token="deployer", body={"value": 1, "reason": "x"}).status == 422
    assert call(base, "PUT", path, token="deployer", body={"reason": "x"}).status == 422
    unknown = call(base, "GET", "/api/v1/jobs/sample.nope/state", token="reader")
    assert unknown.status == 404
    running = operator.add_run(
        JOB,
        "running",
        started=now() - timedelta(seconds=5),
        lease_expires_at=now() + timedelta(minutes=1),
    )
    refused = call(base, "PUT", path, token="deployer", body={"value": "1", "reason": "reset"})
    assert refused.status == 409
    assert f"has a live run {running}" in refused.body["detail"]
    assert _keys(base) == {}
