"""A runtime job deleted through the API, on both stores: ``GET`` of it answers 404 saying who
deleted it and when, its runs and changes stay readable, and the report's row says the same."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.operations.report import build_report
from jobhost.runtime.service import JobService
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from tests.api.api_support import SECRETS, call
from tests.support import ManualClock

PING = {"kind": "http", "interval": "10m", "settings": {"url": "http://127.0.0.1:9/ping"}}
NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


@pytest.fixture
def deleted(store_url: str) -> Iterator[tuple[str, Settings, Engine]]:
    """A server over a store where ``deployer`` created hooks.ping and deleted it."""
    settings = Settings(
        database_url=store_url,
        api_tokens=[
            {
                "name": name,
                "sha256": hashlib.sha256(secret.encode()).hexdigest(),
                "scopes": scopes,
            }
            for name, (secret, scopes) in SECRETS.items()
        ],
    )
    engine = create_store_engine(store_url, create=True)
    upgrade(engine)
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "http"})
    service = JobService(settings, catalog, Store(engine, ManualClock(NOW)), trigger_wait=0)
    made = service.put("hooks.ping", PING, actor="deployer", if_match=None)
    service.delete("hooks.ping", actor="deployer", if_match=made.etag)
    app = create_app(
        store_endpoints(settings, catalog, Store(engine)),
        routes=api_routes(settings, catalog, Store(engine), trigger_wait=0),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}", settings, engine
    finally:
        server.stop()
        engine.dispose()


def test_get_of_a_deleted_runtime_job_is_404_saying_who_and_when(
    deleted: tuple[str, Settings, Engine],
) -> None:
    base, _, _ = deleted
    gone = call(base, "GET", "/api/v1/jobs/hooks.ping", token="reader")
    assert gone.status == 404
    detail = gone.body["detail"]
    assert re.search(
        r"deleted through the API by deployer at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ;", detail
    )
    assert "/api/v1/jobs/hooks.ping/runs" in detail
    assert call(base, "GET", "/api/v1/jobs/hooks.ping/runs", token="reader").status == 200
    changes = call(base, "GET", "/api/v1/changes?job=hooks.ping", token="reader").body
    assert [c["action"] for c in changes["changes"]] == ["create", "delete"]
    # A job nobody ever had is the plain 404.
    never = call(base, "GET", "/api/v1/jobs/hooks.never", token="reader")
    assert never.status == 404 and "deleted" not in never.body["detail"]


def test_the_report_row_of_a_deleted_runtime_job_says_how_it_went(
    deleted: tuple[str, Settings, Engine],
) -> None:
    _, settings, engine = deleted
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "http"})
    report = build_report(settings, catalog, Store(engine, ManualClock(NOW)))
    (row,) = [job for job in report.jobs if job.name == "hooks.ping"]
    assert row.state == "orphaned"
    orphaned = row.has("orphaned")
    assert orphaned is not None
    assert re.fullmatch(
        r"deleted through the API by deployer at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", orphaned.detail
    )
    assert "no loaded module" not in orphaned.text()
