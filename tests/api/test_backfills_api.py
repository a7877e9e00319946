"""``/api/v1`` backfills: start (scope trigger), progress (read), cancel; bad input refused."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobhost.config import Settings
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from tests.api.api_support import SECRETS, call
from tests.support import sample_catalog

NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *"}
BODY = {"from": "2026-11-20", "to": "2026-11-23", "reason": "fixed #812"}


@pytest.fixture
def api(sample_settings: Callable[..., Settings]) -> Iterator[str]:
    tokens = [
        {"name": name, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "scopes": scopes}
        for name, (secret, scopes) in SECRETS.items()
    ]
    config = sample_settings([NIGHTLY], api_tokens=tokens)
    engine = create_store_engine(config.database_url)
    upgrade(engine)
    catalog = sample_catalog(config)
    app = create_app(
        store_endpoints(config, catalog, Store(engine)),
        routes=api_routes(config, catalog, Store(engine)),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}"
    finally:
        server.stop()
        engine.dispose()


def _post(base: str, body: Any, token: str = "ops") -> tuple[int, Any]:
    answer = call(base, "POST", "/api/v1/jobs/sample.nightly/backfills", token=token, body=body)
    return answer.status, answer.body


def test_a_dry_run_lists_and_a_start_records_for_the_hosts(api: str) -> None:
    status, preview = _post(api, {**BODY, "dry_run": True})
    assert status == 200, preview
    nights = ["2026-11-20T03:00:00Z", "2026-11-21T03:00:00Z", "2026-11-22T03:00:00Z"]
    assert (preview["id"], preview["occurrences"]) == (None, nights)
    status, started = _post(api, {**BODY, "concurrency": 2})
    assert status == 202, started
    assert started["occurrences"] == nights
    progress = call(api, "GET", f"/api/v1/backfills/{started['id']}", token="reader")
    assert progress.status == 200
    body = progress.body
    assert (body["state"], body["selected"], body["done"], body["running"]) == ("running", 3, 0, 0)
    assert (body["actor"], body["reason"], body["concurrency"]) == ("ops", "fixed #812", 2)
    path = f"/api/v1/backfills/{started['id']}"
    unsaid = call(api, "DELETE", path, token="ops", body={})
    assert unsaid.status == 422 and unsaid.body["errors"][0]["field"] == "reason"
    cancelled = call(api, "DELETE", path, token="ops", body={"reason": "wrong range"})
    assert cancelled.status == 200
    assert cancelled.body["state"] == "cancelled"
    changes = call(api, "GET", "/api/v1/changes?job=sample.nightly", token="reader").body
    assert [(c["action"], c["reason"]) for c in changes["changes"]] == [
        ("backfill", "fixed #812"),
        ("backfill-cancel", "wrong range"),
    ]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({**BODY, "to": "2999-01-01"}, 422, "reaches the future"),
        ({**BODY, "from": "2026-11-23"}, 422, "must be after"),
        ({**BODY, "mode": "some"}, 422, "mode"),
        ({**BODY, "concurrency": 0}, 422, "concurrency"),
        ({**BODY, "extra": 1}, 422, "extra"),
        ({"from": "2026-11-20", "to": "2026-11-23"}, 422, "reason"),
    ],
)
def test_bad_input_is_refused_with_the_field(
    api: str, body: dict[str, Any], status: int, says: str
) -> None:
    answer, problem = _post(api, body)
    assert answer == status, problem
    assert says in problem["detail"]


def test_scopes_and_unknown_ids(api: str) -> None:
    assert _post(api, BODY, token="reader")[0] == 403
    unknown = call(api, "POST", "/api/v1/jobs/sample.nope/backfills", token="ops", body=BODY)
    assert unknown.status == 404
    assert call(api, "GET", "/api/v1/backfills/" + "0" * 32, token="reader").status == 404
    odd = call(api, "GET", "/api/v1/backfills/<script>", token="reader")
    assert odd.status == 404
    assert "<script>" not in str(odd.body)
