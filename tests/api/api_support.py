"""Talking to ``/api/v1`` over real HTTP, and hosts configured with API tokens."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECRETS = {
    "deployer": ("deployer-secret-0123456789", ["read", "write"]),
    "ops": ("ops-secret-0123456789abcdef", ["read", "trigger"]),
    "reader": ("reader-secret-0123456789abc", ["read"]),
}


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
