"""A sick store never reaches an HTTP client as a 500, a hang or a lie.

PostgreSQL is reached through a TCP proxy the test owns: cut (connections closed, new ones
refused) or hung (connections open, no byte passes). The API, the dashboard and ``/report``
answer 503 problem+json with ``Retry-After`` and nothing of the driver's error; the log says it
once per outage; ``/healthz`` answers at once; a write that times out says it may have been
made. SQLite: a store file that went away answers the same 503.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from jobhost.web.console.pages import Console
from tests.api.api_support import Answer, call
from tests.reliability.proxy import CutProxy

SECRET = "outage-secret-0123456789abcdef"
LEAKS = ("select", "insert", "psycopg", "sqlalchemy", "traceback", "parameters", "127.0.0.1")
PING = {
    "kind": "http",
    "interval": "10m",
    "settings": {"url": "http://127.0.0.1:9/ping"},
    "reason": "new hook",
}


def _serve(database_url: str, **settings: Any) -> tuple[WebServer, Any]:
    config = Settings(
        database_url=database_url,
        api_tokens=[
            {
                "name": "all",
                "sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
                "scopes": ["read", "write", "trigger"],
            }
        ],
        **settings,
    )
    engine = create_store_engine(config.database_url, **config.store_options())
    catalog = build_catalog(config, environ={"JOBHOST_LOAD_PLUGINS": "http"})
    app = create_app(
        store_endpoints(config, catalog, Store(engine)),
        routes=api_routes(config, catalog, Store(engine)),
        pages=Console(config, catalog, Store(engine), allow_actions=False).routes(),
        request_timeout=config.http_request_timeout.total_seconds(),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    return server, engine


def ask(base: str, method: str, path: str, body: Any = None) -> Answer:
    return call(base, method, path, token=SECRET, body=body)


def unavailable(answer: Answer) -> None:
    assert answer.status == 503, (answer.status, answer.body)
    assert answer.content_type == "application/problem+json"
    assert answer.headers["retry-after"] == "5"
    assert answer.body["title"] == "Store unavailable"
    assert "retry" in answer.body["detail"]
    text = str(answer.body).lower()
    assert not [leak for leak in LEAKS if leak in text], answer.body


@pytest.mark.postgres
def test_a_cut_store_answers_503_everywhere_logs_once_and_healthz_stays_up(
    proxied: tuple[str, CutProxy],
) -> None:
    url, proxy = proxied
    # A handler of its own: another test's logging set-up may stop records reaching caplog's.
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    http_log = logging.getLogger("jobhost.http")
    http_log.addHandler(handler)
    level = http_log.level
    http_log.setLevel(logging.INFO)
    server, engine = _serve(url, store_connect_timeout="2s")
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        assert ask(base, "PUT", "/api/v1/jobs/hooks.ping", PING).status == 201
        records.clear()
        proxy.cut()
        for _ in range(3):
            unavailable(ask(base, "GET", "/api/v1/jobs"))
            unavailable(ask(base, "GET", "/api/v1/jobs/hooks.ping"))
            unavailable(ask(base, "GET", "/report"))
            unavailable(ask(base, "GET", "/"))
        put = ask(base, "PUT", "/api/v1/jobs/hooks.ping", {**PING, "interval": "5m"})
        unavailable(put)
        assert "may or may not" in put.body["detail"]
        assert ask(base, "GET", "/healthz").status == 200
        assert ask(base, "GET", "/readyz").status == 503

        warnings = [r for r in records if r.levelno >= logging.WARNING]
        outage = [r for r in warnings if "the store is unavailable" in r.getMessage()]
        assert len(outage) == 1, [r.getMessage() for r in warnings]
        assert not [r for r in records if r.exc_info], "a traceback was logged"
        assert "password" not in outage[0].getMessage()

        proxy.restore()
        assert ask(base, "GET", "/api/v1/jobs/hooks.ping").status == 200
        assert any("the store answers again" in r.getMessage() for r in records)
    finally:
        http_log.removeHandler(handler)
        http_log.setLevel(level)
        server.stop()
        engine.dispose()


@pytest.mark.postgres
def test_a_hung_store_never_holds_healthz_and_a_timed_out_write_says_it_may_be_made(
    proxied: tuple[str, CutProxy],
) -> None:
    url, proxy = proxied
    server, engine = _serve(url, store_connect_timeout="2s", http_request_timeout="4s")
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        assert ask(base, "PUT", "/api/v1/jobs/hooks.ping", PING).status == 201
        proxy.hang()
        began = time.monotonic()
        put = ask(base, "PUT", "/api/v1/jobs/hooks.ping", {**PING, "interval": "5m"})
        assert time.monotonic() - began < 10
        assert put.status in {503, 504}, put.body
        assert "may or may not" in str(put.body)
        # Every request left waiting on the store holds a worker thread; the probe needs none.
        for _ in range(3):
            began = time.monotonic()
            assert ask(base, "GET", "/healthz").status == 200
            assert time.monotonic() - began < 1.0
        got = ask(base, "GET", "/api/v1/jobs")
        assert got.status in {503, 504}
        assert not [leak for leak in LEAKS if leak in str(got.body).lower()], got.body
    finally:
        proxy.restore()
        server.stop()
        engine.dispose()


def test_an_sqlite_store_that_cannot_be_opened_answers_503(tmp_path: Path) -> None:
    store = tmp_path / "jobhost.db"
    engine = create_store_engine(f"sqlite:///{store}")
    upgrade(engine)
    engine.dispose()
    server, engine = _serve(f"sqlite:///{store}")
    base = f"http://127.0.0.1:{server.address[1]}"
    try:
        assert ask(base, "GET", "/api/v1/jobs").status == 200
        engine.dispose()
        # The file is gone and something SQLite cannot open stands in its place.
        for path in tmp_path.glob("jobhost.db*"):
            path.rename(tmp_path / f"moved-{path.name}")
        store.mkdir()
        for path in ("/api/v1/jobs", "/report", "/"):
            unavailable(ask(base, "GET", path))
        assert ask(base, "GET", "/healthz").status == 200
    finally:
        server.stop()
        engine.dispose()
