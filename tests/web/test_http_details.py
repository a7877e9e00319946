"""The smaller guarantees of the HTTP surfaces, on both stores: the dashboard's notice comes from
fixed codes, every answer carries the security headers, conditional requests follow RFC 9110."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.api_support import Answer, call, served_api

PING = {
    "kind": "http",
    "interval": "1h",
    "settings": {"url": "http://127.0.0.1:9/"},
    "reason": "new hook",
}


@pytest.fixture
def base(store_url: str) -> Iterator[str]:
    with served_api(store_url, plugins="http", console=True) as (base, _):
        yield base


def ask(base: str, method: str, path: str, body: object = None, **headers: str) -> Answer:
    return call(base, method, path, token="deployer", body=body, headers=headers)


def test_the_notice_after_an_action_is_a_fixed_text_never_the_links(base: str) -> None:
    assert ask(base, "PUT", "/api/v1/jobs/hooks.ping", PING).status == 201
    spoof = "Your+session+expired:+call+555-0100"
    page = call(base, "GET", f"/jobs/hooks.ping?done={spoof}").body
    assert "555-0100" not in page and 'id="notice"' not in page
    page = call(base, "GET", "/jobs/hooks.ping?done=paused").body
    assert 'id="notice">paused<' in page


@pytest.mark.parametrize(
    "path",
    ["/healthz", "/report", "/nowhere", "/api/v1/jobs", "/api/v1/openapi.json", "/api/v1/x"],
)
def test_every_answer_carries_the_security_headers(base: str, path: str) -> None:
    for answer in (call(base, "GET", path), ask(base, "GET", path)):
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert answer.headers["cache-control"] == "no-store", path


def test_conditional_requests_follow_rfc_9110(base: str) -> None:
    path = "/api/v1/jobs/hooks.cond"
    made = ask(base, "PUT", path, PING, **{"If-None-Match": "*"})
    assert made.status == 201
    etag = made.headers["etag"]
    # If-None-Match: * makes a PUT create-only.
    again = ask(base, "PUT", path, {**PING, "interval": "2h"}, **{"If-None-Match": "*"})
    assert again.status == 412 and "already exists" in again.body["detail"]
    assert ask(base, "GET", path).body["runtime"]["definition"]["interval"] == "1h"
    # A GET naming the current ETag (weakly, too) answers 304 with no body.
    for tag in (etag, f"W/{etag}", f'"other", {etag}'):
        unchanged = ask(base, "GET", path, **{"If-None-Match": tag})
        assert unchanged.status == 304 and unchanged.body is None
        assert unchanged.headers["etag"] == etag
    assert ask(base, "GET", path, **{"If-None-Match": '"0-old"'}).status == 200
    # A weak If-Match never matches (strong comparison).
    weak = ask(base, "PUT", path, {**PING, "interval": "2h"}, **{"If-Match": f"W/{etag}"})
    assert weak.status == 412 and "weak" in weak.body["detail"]
    assert ask(base, "PUT", path, {**PING, "interval": "2h"}, **{"If-Match": etag}).status == 200
