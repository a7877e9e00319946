"""``trusted_proxies`` decides whose ``X-Forwarded-For`` is believed: by default no one's, so a
client on the machine cannot rotate the header past the wrong-token brake; a listed proxy's
is, so the brake counts the address it forwards for. A real server on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jobhost.config import Settings
from jobhost.web import WebServer
from jobhost.web.access import GUESS_LIMIT
from tests.api.api_support import api_app, call


@contextmanager
def _served(tmp_path: Path, proxies: list[str]) -> Iterator[str]:
    with api_app(f"sqlite:///{tmp_path}/store.db") as (app, _):
        server = WebServer(("127.0.0.1", 0), app, trusted_proxies=proxies)
        server.start()
        try:
            yield f"http://127.0.0.1:{server.address[1]}"
        finally:
            server.stop()


def _guess(base: str, forwarded: str) -> int:
    headers = {"X-Forwarded-For": forwarded}
    return call(base, "GET", "/api/v1/jobs", token="wrong-secret-0", headers=headers).status


def test_by_default_no_forwarded_address_is_believed(tmp_path: Path) -> None:
    assert Settings(database_url="sqlite:///x.db").trusted_proxies == []
    with _served(tmp_path, []) as base:
        answers = [_guess(base, f"203.0.113.{n}") for n in range(GUESS_LIMIT + 1)]
    assert answers[:GUESS_LIMIT] == [401] * GUESS_LIMIT
    assert answers[GUESS_LIMIT] == 429


def test_a_trusted_proxy_forwards_the_address_the_brake_counts(tmp_path: Path) -> None:
    with _served(tmp_path, ["127.0.0.0/8"]) as base:
        rotating = [_guess(base, f"203.0.113.{n}") for n in range(GUESS_LIMIT + 1)]
        same = [_guess(base, "198.51.100.7") for _ in range(GUESS_LIMIT + 1)]
    assert set(rotating) == {401}  # each forwarded address guessed once
    assert same[GUESS_LIMIT] == 429


@pytest.mark.parametrize("given", ["*", "proxy.internal", "10.0.0.0/33"])
def test_a_proxy_that_is_no_address_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        Settings(database_url="sqlite:///x.db", trusted_proxies=[given])
