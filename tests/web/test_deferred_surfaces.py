"""``jobhost run``'s application: the probes answer while the API and dashboard are built."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.types import ASGIApp

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.firing.host import HostStatus
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer
from jobhost.web.surfaces import DeferredApp, host_application
from tests.http_get import get
from tests.waiting import wait_for

SECRET = "deferred-secret-0123456789abcdef"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Any]:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    settings = Settings(
        database_url=url,
        poll_interval=timedelta(seconds=1),
        api_tokens=[
            {
                "name": "all",
                "sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
                "scopes": ["read"],
            }
        ],
    )
    yield SimpleNamespace(
        settings=settings,
        status=HostStatus(catalog_ok=True, last_tick=time.monotonic()),
        catalog=Catalog(jobs={}, problems=[]),
        store=Store(engine),
        clock=None,
    )
    engine.dispose()


def test_a_request_before_the_host_is_ready_gets_the_whole_applications_answer(
    host: Any,
) -> None:
    app = host_application(host, lambda: b"")
    with _served(app) as base:
        code, _, body = get(f"{base}/readyz")
        assert code == 503 and "not registered" in json.loads(body)["detail"]
        # The first request that is not a probe builds the rest and waits for it.
        code, _, body = get(f"{base}/nope")
        assert code == 404
        listed = json.loads(body)["endpoints"]
        assert "/readyz" in listed and "/api/v1" in listed
        code, kind, _ = get(f"{base}/api/v1/openapi.json")
        assert (code, kind) == (200, "application/json")
        assert get(f"{base}/")[0] == 200  # the dashboard


def test_only_a_request_that_needs_them_builds_the_api_and_dashboard(host: Any) -> None:
    app = host_application(host, lambda: b"")
    host.status.synced = True
    with _served(app) as base:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert get(f"{base}{path}")[0] in {200, 503}
        assert app._app is None
        assert get(f"{base}/report")[0] == 200
        assert app._app is not None
        assert app.built() is app.built()  # once, however many ask


def test_probes_answer_while_the_rest_waits_for_the_build() -> None:
    release = threading.Event()
    calls: list[str] = []

    async def quick(scope: Any, receive: Any, send: Any) -> None:
        await _answer(send, b"quick")

    async def whole(scope: Any, receive: Any, send: Any) -> None:
        await _answer(send, b"whole")

    def build() -> ASGIApp:
        calls.append("build")
        release.wait(30)
        return whole

    app = DeferredApp(quick, build)
    with _served(app) as base:
        waiting = threading.Thread(target=lambda: calls.append(get(f"{base}/report")[2]))
        waiting.start()
        wait_for(lambda: calls == ["build"], 10, "the build to start")
        assert get(f"{base}/readyz")[2] == "quick"
        assert get(f"{base}/healthz")[2] == "quick"
        assert get(f"{base}/metrics")[2] == "quick"
        assert calls == ["build"]  # the report still waits
        release.set()
        waiting.join(10)
        assert calls == ["build", "whole"]
        assert get(f"{base}/readyz/")[2] == "whole"  # not a probe's path
        assert calls == ["build", "whole"]  # built once


async def _answer(send: Any, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


class _served:
    def __init__(self, app: ASGIApp) -> None:
        self.server = WebServer(("127.0.0.1", 0), app)

    def __enter__(self) -> str:
        self.server.start()
        return f"http://127.0.0.1:{self.server.address[1]}"

    def __exit__(self, *_: object) -> None:
        self.server.stop()
