"""Talking to ``/api/v1`` over real HTTP, and hosts configured with API tokens."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from jobhost.web.console.pages import Console

SECRETS = {
    "deployer": ("deployer-secret-0123456789", ["read", "write"]),
    "ops": ("ops-secret-0123456789abcdef", ["read", "trigger"]),
    "reader": ("reader-secret-0123456789abc", ["read"]),
}


@contextmanager
def served_api(store_url: str, **options: Any) -> Iterator[tuple[str, Engine]]:
    """The API (and the operator endpoints) over ``store_url`` with the tokens of
    :data:`SECRETS`, served on a free port: its base URL and the store's engine. ``options``
    are those of :func:`api_app`."""
    with api_app(store_url, **options) as (app, engine):
        server = WebServer(("127.0.0.1", 0), app)
        server.start()
        try:
            yield f"http://127.0.0.1:{server.address[1]}", engine
        finally:
            server.stop()


@contextmanager
def api_app(
    store_url: str,
    *,
    plugins: str = "",
    console: bool = False,
    routes: Sequence[BaseRoute] = (),
    **settings: Any,
) -> Iterator[tuple[Starlette, Engine]]:
    """The application :func:`served_api` serves, and the store's engine, over ``store_url``
    (upgraded): ``plugins`` as ``JOBHOST_LOAD_PLUGINS`` (none by default), the console's pages
    when ``console`` (with actions if ``console_actions``), ``routes`` after the API's, and
    ``settings`` as further :class:`Settings` (``api_body_limit``, ``operator_tokens``, ...)."""
    config = Settings(
        database_url=store_url,
        api_tokens=[
            {
                "name": name,
                "sha256": hashlib.sha256(secret.encode()).hexdigest(),
                "scopes": scopes,
            }
            for name, (secret, scopes) in SECRETS.items()
        ],
        **settings,
    )
    engine = create_store_engine(store_url)
    try:
        upgrade(engine)
        catalog = build_catalog(config, environ={"JOBHOST_LOAD_PLUGINS": plugins})
        pages = (
            Console(config, catalog, Store(engine), allow_actions=config.console_actions).routes()
            if console
            else ()
        )
        yield (
            create_app(
                store_endpoints(config, catalog, Store(engine)),
                routes=[*api_routes(config, catalog, Store(engine)), *routes],
                pages=pages,
            ),
            engine,
        )
    finally:
        engine.dispose()


def token_lines() -> list[str]:
    """``[[api_tokens]]`` entries for :data:`SECRETS`, by digest only."""
    lines: list[str] = []
    for name, (secret, scopes) in SECRETS.items():
        digest = hashlib.sha256(secret.encode()).hexdigest()
        lines += ["[[api_tokens]]", f'name = "{name}"', f'sha256 = "{digest}"']
        lines.append("scopes = [" + ", ".join(f'"{s}"' for s in scopes) + "]")
    return lines


def write_config(path: Path, store_url: str, **settings: str) -> Path:
    lines = [f'database_url = "{store_url}"']
    lines += [f'{key} = "{value}"' for key, value in settings.items()]
    lines += token_lines()
    path.write_text("\n".join(lines) + "\n")
    return path


def host_env(host_id: str, port: int) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    return {
        **clean,
        "JOBHOST_LOAD_PLUGINS": "http",
        "JOBHOST_HOST_ID": host_id,
        "JOBHOST_HTTP_LISTEN": f"127.0.0.1:{port}",
    }


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def call(
    base: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request; ``token`` names a key of :data:`SECRETS` (or is a bare secret)."""
    sent = dict(headers or {})
    if token is not None:
        secret = SECRETS[token][0] if token in SECRETS else token
        sent["Authorization"] = f"Bearer {secret}"
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(f"{base}{path}", data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return _answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return _answer(error.code, error.headers, error.read())


def ready(base: str) -> bool:
    """True once the host answers /readyz with 200 (False while it is not listening yet)."""
    try:
        return call(base, "GET", "/readyz").status == 200
    except urllib.error.URLError:
        return False


def _answer(status: int, headers: Any, payload: bytes) -> Answer:
    lowered = {key.lower(): value for key, value in headers.items()}
    body: Any = payload.decode() if payload else None
    if payload and "json" in lowered.get("content-type", ""):
        body = json.loads(payload)
    return Answer(status, lowered, body)
