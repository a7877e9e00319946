"""What the dashboard's HTTP tests share: a cookie-keeping client, the console served in-process
on an :class:`Operator`'s store, and signing in with an operator token."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from jobhost.store import Store
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.console.pages import Console
from tests.cli.operator_support import Operator

__all__ = ["TOKEN", "Client", "add_operator_token", "csrf_of", "serve_console", "sign_in"]

TOKEN = "bob-token-0123456789"
"""Operator ``bob``'s token, once :func:`add_operator_token` wrote it to the configuration."""


class Client:
    """HTTP to one base URL, keeping the session cookie like a browser; errors are answers."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def get(self, path: str) -> tuple[int, dict[str, str], str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, body: str) -> tuple[int, dict[str, str], str]:
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return self._open(urllib.request.Request(self.base + path, body.encode(), headers))

    def _open(self, request: urllib.request.Request) -> tuple[int, dict[str, str], str]:
        try:
            with self.opener.open(request, timeout=30) as response:
                headers = {k.lower(): v for k, v in response.headers.items()}
                return response.status, headers, response.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                headers = {k.lower(): v for k, v in error.headers.items()}
                return error.code, headers, error.read().decode()


def add_operator_token(operator: Operator, name: str = "bob", token: str = TOKEN) -> None:
    """Give ``name`` an operator token in the configuration file."""
    with operator.config.open("a") as config:
        config.write(f'[operator_tokens]\n{name} = "{token}"\n')


@contextmanager
def serve_console(
    operator: Operator, *, allow_actions: bool, console: Console | None = None
) -> Iterator[Client]:
    """The API and the dashboard on the operator's store, served in this process."""
    settings = operator.settings
    if console is None:
        console = Console(
            settings, operator.catalog(), Store(operator.engine), allow_actions=allow_actions
        )
    app = create_app(
        store_endpoints(settings, console.catalog, Store(operator.engine)), pages=console.routes()
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield Client(f"http://127.0.0.1:{server.address[1]}")
    finally:
        server.stop()


def sign_in(client: Client, token: str = TOKEN) -> str:
    """Sign in with ``token``; the page that answers."""
    status, _, page = client.post("/signin", f"token={token}")
    assert status == 200, page
    return page


def csrf_of(client: Client, path: str) -> str:
    """The CSRF token in the form on ``path`` (a signed-in page)."""
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(path)[2])
    assert found is not None, "no form on " + path
    return found[1]
