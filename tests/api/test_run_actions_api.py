"""``POST /api/v1/runs/{id}/retry``, ``/runs/{id}/cancel`` (scope trigger) and ``POST
/api/v1/pause`` / ``/resume`` (scope write): the same operator actions as the CLI, with the API
token's name in the change log; bounded, validated bodies; both stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.store import Store
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from tests.api.api_support import call, token_lines
from tests.cli.operator_support import Operator, now

JOBS = [
    {"name": "sample.flaky", "cron": "0 3 * * *", "behaviour": "fail-once"},
    {"name": "sample.slow", "cron": "0 3 * * *"},
]
OCCURRENCE = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)


class Api:
    def __init__(self, base: str, operator: Operator) -> None:
        self.base = base
        self.operator = operator

    def post(self, path: str, body: object, token: str = "ops") -> tuple[int, object]:
        answer = call(self.base, "POST", f"/api/v1{path}", token=token, body=body)
        return answer.status, answer.body

    def changes(self) -> list[tuple[object, ...]]:
        answer = call(self.base, "GET", "/api/v1/changes", token="reader")
        assert answer.status == 200
        return [(c["job"], c["action"], c["actor"], c["reason"]) for c in answer.body["changes"]]


@pytest.fixture
def api(store_url: str, tmp_path: Path) -> Iterator[Api]:
    operator = Operator(store_url, tmp_path)
    operator.configure(JOBS)
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
        yield Api(f"http://127.0.0.1:{server.address[1]}", operator)
    finally:
        server.stop()
        operator.close()


def test_retry_queues_the_next_attempt_and_refuses_what_cannot_run_again(api: Api) -> None:
    operator = api.operator
    failed = operator.add_run("sample.flaky", "failed", occurrence=OCCURRENCE, error="boom")
    assert api.post(f"/runs/{failed}/retry", {"reason": "x"}, token="reader")[0] == 403
    status, body = api.post(f"/runs/{failed}/retry", {})
    assert status == 422 and "reason" in str(body)
    status, body = api.post(f"/runs/{failed}/retry", {"reason": "fixed", "extra": 1})
    assert status == 422
    status, body = api.post(f"/runs/{failed}/retry", {"reason": "vendor fixed"})
    assert status == 202, body
    assert isinstance(body, dict)
    assert (body["retry_of"], body["job"], body["attempt"], body["outcome"]) == (
        failed,
        "sample.flaky",
        2,
        "pending",
    )
    retry = next(r for r in operator.runs("sample.flaky") if r.id == body["run_id"])
    assert (retry.outcome, retry.occurrence, retry.attempt, retry.requested_by) == (
        "pending",
        OCCURRENCE,
        2,
        "ops",
    )
    status, again = api.post(f"/runs/{failed}/retry", {"reason": "again"})
    assert status == 409 and f"(run {retry.id}) is pending" in str(again)
    status, missing = api.post("/runs/no-such-run/retry", {"reason": "x"})
    assert status == 404 and "no-such-run" not in str(missing)
    assert api.post("/runs/" + "x" * 200 + "/retry", {"reason": "x"})[0] == 404
    fine = operator.add_run("sample.flaky", "succeeded")
    status, body = api.post(f"/runs/{fine}/retry", {"reason": "x"})
    assert status == 409 and "nothing to retry" in str(body)
    assert api.changes() == [("sample.flaky", "retry", "ops", "vendor fixed")]


def test_cancel_asks_the_host_and_a_queued_run_is_cancelled_at_once(api: Api) -> None:
    operator = api.operator
    running = operator.add_run(
        "sample.slow", "running", host="live-1", lease_expires_at=now() + timedelta(hours=1)
    )
    status, body = api.post(f"/runs/{running}/cancel", {"reason": "stuck on vendor"})
    assert status == 202, body
    assert body == {
        "run_id": running,
        "job": "sample.slow",
        "host": "live-1",
        "requested": "requested",
        "cancelled_by": "ops",
        "reason": "stuck on vendor",
    }
    # Asked again: the first request stands, and says whose it is.
    status, body = api.post(f"/runs/{running}/cancel", {"reason": "me too"}, token="deployer")
    assert status == 403  # deployer lacks scope trigger
    status, body = api.post(f"/runs/{running}/cancel", {"reason": "me too"})
    assert status == 202 and isinstance(body, dict)
    assert (body["requested"], body["reason"]) == ("already", "stuck on vendor")
    gone = operator.add_run(
        "sample.slow", "running", host="gone-1", lease_expires_at=now() - timedelta(minutes=1)
    )
    status, body = api.post(f"/runs/{gone}/cancel", {"reason": "x"})
    assert status == 409 and "which is not alive" in str(body)
    pending = operator.add_run("sample.slow", "pending")
    status, body = api.post(f"/runs/{pending}/cancel", {"reason": "not today"})
    assert status == 202 and isinstance(body, dict) and body["requested"] == "cancelled"
    (queued,) = [r for r in operator.runs("sample.slow") if r.id == pending]
    assert (queued.outcome, queued.cancel_requested_by) == ("cancelled", "ops")
    assert api.changes() == [
        ("sample.slow", "cancel", "ops", "stuck on vendor"),
        ("sample.slow", "cancel", "ops", "not today"),
    ]


def test_pause_and_resume_many_jobs_by_module_or_pattern(api: Api) -> None:
    status, body = api.post("/pause", {"modules": ["sample"], "reason": "vendor outage"}, "ops")
    assert status == 403  # pause needs scope write
    status, body = api.post("/pause", {"reason": "x"}, "deployer")
    assert status == 422 and "modules" in str(body)
    status, body = api.post("/pause", {"modules": "sample", "reason": "x"}, "deployer")
    assert status == 422
    status, body = api.post("/pause", {"modules": ["nope"], "reason": "x"}, "deployer")
    assert status == 404
    status, body = api.post(
        "/pause", {"modules": ["sample"], "reason": "vendor outage"}, "deployer"
    )
    assert status == 200, body
    assert body == {
        "jobs": [
            {"job": "sample.flaky", "paused": True, "changed": True},
            {"job": "sample.slow", "paused": True, "changed": True},
        ]
    }
    status, body = api.post("/resume", {"match": ["sample.s*"], "reason": "back"}, "deployer")
    assert status == 200
    assert body == {"jobs": [{"job": "sample.slow", "paused": False, "changed": True}]}
    flaky = api.operator.schedule("sample.flaky")
    slow = api.operator.schedule("sample.slow")
    assert flaky is not None and slow is not None
    assert (flaky.paused, flaky.paused_by, slow.paused) == (True, "deployer", False)
    assert api.changes() == [
        ("sample.flaky", "pause", "deployer", "vendor outage"),
        ("sample.slow", "pause", "deployer", "vendor outage"),
        ("sample.slow", "resume", "deployer", "back"),
    ]
