"""Every body the web surface reads is bounded before it is read: a ``Content-Length`` above the
bound is answered 413 without a byte taken from the client, and a body without one (chunked) is
cut off as soon as it passes the bound. Driven at the ASGI level, so the test counts exactly
how much of the body the application asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette

from tests.api.api_support import SECRETS, api_app

SECRET = SECRETS["deployer"][0]
OPERATOR = "bob-token-0123456789"
CHUNK = 64 * 1024
HUGE = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starlette]:
    directory: Path = tmp_path_factory.mktemp("bodies")
    with api_app(
        f"sqlite:///{directory}/store.db",
        plugins="http",
        console=True,
        console_actions=True,
        operator_tokens={"bob": OPERATOR},
    ) as (app, _):
        yield app


class Sent:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.chunks_read = 0


def post(
    app: Starlette,
    path: str,
    *,
    method: str = "POST",
    content_length: int | None,
    chunks: int,
    content_type: str = "application/x-www-form-urlencoded",
    body: bytes | None = None,
    cookie: str | None = None,
) -> Sent:
    """One request whose body is ``chunks`` chunks of 64 KiB, announced as ``content_length``
    (None: chunked, no length)."""
    sent = Sent()
    headers = [
        (b"host", b"testserver"),
        (b"content-type", content_type.encode()),
        (b"authorization", f"Bearer {SECRET}".encode()),
    ]
    if cookie is not None:
        headers.append((b"cookie", cookie.encode()))
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }

    async def receive() -> dict[str, Any]:
        if sent.chunks_read >= chunks:
            await anyio.sleep(3600)  # the client has nothing more: the app must not wait
        sent.chunks_read += 1
        return {
            "type": "http.request",
            "body": b"a" * CHUNK if body is None else body,
            "more_body": sent.chunks_read < chunks,
        }

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent.status = message["status"]
            sent.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            sent.body += message.get("body", b"")

    async def main() -> None:
        with anyio.fail_after(10):
            await app(scope, receive, send)

    anyio.run(main)
    return sent


DASHBOARD = ["/signin", "/jobs/sample.job/trigger"]


def session_of(app: Starlette) -> str:
    form = f"token={OPERATOR}".encode()
    sent = post(app, "/signin", content_length=len(form), chunks=1, body=form)
    assert sent.status == 303
    return sent.headers["set-cookie"].split(";", 1)[0]


API = [("PUT", "/api/v1/jobs/hooks.big"), ("POST", "/api/v1/jobs/hooks.big/pause")]


@pytest.mark.parametrize("path", DASHBOARD)
def test_a_dashboard_form_announced_too_large_is_refused_unread(app: Starlette, path: str) -> None:
    cookie = session_of(app)
    sent = post(app, path, content_length=HUGE, chunks=HUGE // CHUNK, cookie=cookie)
    assert sent.status == 413
    assert sent.chunks_read == 0


@pytest.mark.parametrize("path", DASHBOARD)
def test_a_chunked_dashboard_form_is_cut_off_at_the_bound(app: Starlette, path: str) -> None:
    cookie = session_of(app)
    sent = post(app, path, content_length=None, chunks=HUGE // CHUNK, cookie=cookie)
    assert sent.status == 413
    assert sent.chunks_read == 1  # 64 KiB already passes the 16 KiB bound


@pytest.mark.parametrize(("method", "path"), API)
def test_an_api_body_announced_too_large_is_refused_unread(
    app: Starlette, method: str, path: str
) -> None:
    sent = post(
        app,
        path,
        method=method,
        content_length=HUGE,
        chunks=HUGE // CHUNK,
        content_type="application/json",
    )
    assert sent.status == 413
    assert sent.headers["content-type"] == "application/problem+json"
    assert b"api_body_limit" in sent.body
    assert sent.chunks_read == 0


@pytest.mark.parametrize(("method", "path"), API)
def test_a_chunked_api_body_is_cut_off_at_the_bound(app: Starlette, method: str, path: str) -> None:
    sent = post(
        app,
        path,
        method=method,
        content_length=None,
        chunks=HUGE // CHUNK,
        content_type="application/json",
    )
    assert sent.status == 413
    # api_body_limit is 64 KiB: the second chunk passes it.
    assert sent.chunks_read == 2


def test_a_body_within_the_bound_is_read_whole(app: Starlette) -> None:
    body = b'{"reason": "fits"}'
    sent = post(
        app,
        "/api/v1/jobs/hooks.missing/pause",
        content_length=None,
        chunks=1,
        body=body,
        content_type="application/json",
    )
    assert sent.status == 404  # read, parsed, and the job looked up
