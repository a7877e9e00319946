"""Input that once answered 500 (and showed SQL) is refused with 4xx problem+json naming the
field, on both stores; an unexpected exception answers a bare 500 with an id the log carries,
logged with its traceback once and not again within the minute."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.api.api_support import SECRETS, Answer, call, served_api
from tests.web.console_support import Client, csrf_of

LEAKS = ("select", "insert", "psycopg", "sqlalchemy", "traceback", "parameters")


@pytest.fixture
def base(store_url: str) -> Iterator[str]:
    boom = Route("/boom", _boom(store_url))
    with served_api(store_url, plugins="http", console=True, routes=[boom]) as (base, _):
        yield base


def _boom(store_url: str) -> Any:
    # A failure of its own kind per store, so each test sees its first traceback.
    failure = type(f"Boom{hash(store_url) & 0xFFFF}", (RuntimeError,), {})

    async def endpoint(request: Request) -> Response:
        raise failure("SELECT secret FROM somewhere WHERE password = 'hunter2'")

    return endpoint


def ask(base: str, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
    return call(base, method, path, token="deployer", body=body, raw=raw)


def refused(answer: Answer, status: int, field: str) -> None:
    assert answer.status == status, answer.body
    assert answer.content_type == "application/problem+json"
    assert field in [error["field"] for error in answer.body.get("errors", [])], answer.body
    text = str(answer.body).lower()
    assert not any(leak in text for leak in LEAKS), answer.body


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/jobs/hooks.a%00b", "path"),
        ("/api/v1/jobs?search=a%00b", "search"),
        ("/api/v1/changes?job=a%00b", "job"),
        ("/api/v1/jobs/hooks.a/runs?outcome=%00", "outcome"),
        ("/jobs/hooks.a%00b", "path"),  # the dashboard, unauthenticated
        ("/?q=%00", "q"),
        ("/runs/%00", "path"),
    ],
)
def test_a_nul_byte_in_a_path_or_query_is_refused(base: str, path: str, field: str) -> None:
    refused(call(base, "GET", path), 400, field)


def test_a_nul_byte_in_a_reason_or_definition_is_refused(base: str) -> None:
    made = ask(
        base,
        "PUT",
        "/api/v1/jobs/hooks.nul",
        {
            "kind": "http",
            "interval": "1h",
            "settings": {"url": "http://127.0.0.1:9/"},
            "reason": "x",
        },
    )
    assert made.status == 201
    refused(ask(base, "POST", "/api/v1/jobs/hooks.nul/pause", {"reason": "a\x00b"}), 422, "reason")
    body = {
        "kind": "http",
        "interval": "1h",
        "description": "x\x00",
        "settings": {"url": "http://127.0.0.1:9/"},
        "reason": "x",
    }
    refused(ask(base, "PUT", "/api/v1/jobs/hooks.nul", body), 422, "description")


def test_a_name_longer_than_the_store_holds_is_refused(base: str) -> None:
    name = "hooks." + "a" * 250
    body = {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}}
    refused(ask(base, "PUT", f"/api/v1/jobs/{name}", {**body, "reason": "x"}), 422, "name")
    assert ask(base, "GET", f"/api/v1/jobs/{name}").status == 404
    # Described, not echoed: a caller's name of any length makes a small answer.
    answer = ask(base, "PUT", "/api/v1/jobs/hooks." + "a" * 10_000, {**body, "reason": "x"})
    assert answer.status == 422 and "a" * 300 not in json.dumps(answer.body)
    assert answer.body["detail"].startswith("job of 10006 characters: name: ")


def test_an_unknown_job_of_a_name_longer_than_any_is_described_not_echoed(base: str) -> None:
    answer = ask(base, "GET", "/api/v1/jobs/" + "x" * 10_000)
    assert answer.status == 404
    assert "x" * 300 not in json.dumps(answer.body)
    assert "no job of 10000 characters" in answer.body["detail"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("after=2147483648", "after"),
        ("after=99999999999999999999999", "after"),
        ("limit=%C2%B2", "limit"),
        ("limit=-1", "limit"),
    ],
)
def test_a_number_out_of_range_or_not_a_number_is_refused(
    base: str, query: str, field: str
) -> None:
    refused(ask(base, "GET", f"/api/v1/changes?{query}"), 400, field)


def test_a_change_log_filter_by_a_name_longer_than_any_is_refused_as_documented(
    base: str,
) -> None:
    refused(ask(base, "GET", "/api/v1/changes?job=" + "a" * 201), 400, "job")
    assert ask(base, "GET", "/api/v1/changes?job=" + "a" * 200).status == 200
    document = call(base, "GET", "/api/v1/openapi.json").body
    (job,) = [p for p in document["paths"]["/changes"]["get"]["parameters"] if p["name"] == "job"]
    assert job["schema"]["maxLength"] == 200


def test_an_unknown_api_path_is_not_echoed(base: str) -> None:
    answer = ask(base, "GET", "/api/v1/nowhere/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert answer.status == 404 and answer.content_type == "application/problem+json"
    assert "script" not in str(answer.body) and "nowhere" not in str(answer.body)
    assert "/api/v1/openapi.json" in answer.body["detail"]
    # A line break in a segment passes the API's own catch-all: the answer is the same.
    broken = ask(base, "GET", "/api/v1/runs/S%C3%A0%0A/logs")
    assert broken.status == 404 and broken.content_type == "application/problem+json"
    assert "runs" not in str(broken.body)
    page = call(base, "GET", "/nowhere-%3Cb%3E")
    assert page.status == 404 and "nowhere" not in str(page.body)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("TRACE", "/api/v1/jobs", "GET, HEAD"),
        ("BREW", "/api/v1/jobs/hooks.a", "DELETE, GET, HEAD, PUT"),
        ("PUT", "/api/v1/openapi.json", "GET, HEAD"),
        ("DELETE", "/api/v1/kinds", "GET, HEAD"),
        ("GET", "/api/v1/jobs/hooks.a/trigger", "POST"),
    ],
)
def test_a_method_a_path_does_not_take_is_405_naming_those_it_does(
    base: str, method: str, path: str, allow: str
) -> None:
    answer = ask(base, method, path)
    assert answer.status == 405 and answer.content_type == "application/problem+json"
    assert answer.headers["allow"] == allow
    assert answer.body["detail"] == f"{method} is not allowed here; use {allow}"


def test_the_largest_change_id_is_accepted(base: str) -> None:
    answer = ask(base, "GET", "/api/v1/changes?after=2147483647")
    assert answer.status == 200 and answer.body["changes"] == []


def test_a_body_that_is_not_utf8_is_refused_saying_so(base: str) -> None:
    latin1 = '{"kind": "http", "reason": "caf\u00e9"}'.encode("latin-1")
    answer = ask(base, "PUT", "/api/v1/jobs/hooks.latin", raw=latin1)
    assert answer.status == 400 and answer.content_type == "application/problem+json"
    assert answer.body["detail"] == (
        "the body is not UTF-8 (at byte offset 31): send the JSON as UTF-8"
    )


def test_deeply_nested_json_is_refused(base: str) -> None:
    deep = b"[" * 30_000 + b"]" * 30_000
    answer = ask(base, "PUT", "/api/v1/jobs/hooks.deep", raw=deep)
    assert answer.status in (400, 413) and answer.content_type == "application/problem+json"
    nested: Any = "x"
    for _ in range(40):
        nested = {"a": nested}
    body = {
        "kind": "http",
        "interval": "1h",
        "settings": {"url": "http://x/", "body": nested},
        "reason": "x",
    }
    answer = ask(base, "PUT", "/api/v1/jobs/hooks.deep", body)
    assert answer.status == 422 and "nested deeper" in answer.body["detail"]


def test_an_unexpected_error_answers_a_bare_500_with_the_logs_id(
    base: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="jobhost.http")
    first = call(base, "GET", "/boom")
    second = call(base, "GET", "/boom")
    for answer in (first, second):
        assert answer.status == 500
        assert "hunter2" not in str(answer.body) and "SELECT" not in str(answer.body)
        assert answer.body["id"] in answer.body["detail"]
    records = [r for r in caplog.records if r.name == "jobhost.http"]
    assert len(records) == 2  # once per failure: nothing else logs it again
    assert first.body["id"] in records[0].getMessage() and records[0].exc_info is not None
    assert second.body["id"] in records[1].getMessage() and records[1].exc_info is None


@pytest.mark.parametrize(
    ("path", "media"),
    [
        ("/api/v1/jobs/hooks.gone", "application/json"),
        ("/signin", "application/x-www-form-urlencoded"),
    ],
)
def test_a_client_that_leaves_before_its_body_is_whole_logs_no_error(
    store_url: str, caplog: pytest.LogCaptureFixture, path: str, media: str
) -> None:
    caplog.set_level(logging.WARNING)
    operators = {"alice": "alice-token-0123456789"}
    served = served_api(store_url, console=True, console_actions=True, operator_tokens=operators)
    with served as (base, _):
        port = int(base.rsplit(":", 1)[1])
        secret = SECRETS["deployer"][0]
        head = (
            f"{'PUT' if path.startswith('/api') else 'POST'} {path} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {secret}\r\nContent-Type: {media}\r\n"
            "Content-Length: 100\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head.encode() + b'{"kind"')
        # The server sees the hang-up at once; the time is for a failure to be logged.
        time.sleep(0.5)
        assert call(base, "GET", "/healthz").status == 200
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def test_a_line_break_or_escape_in_a_path_cannot_forge_or_colour_a_log_line(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    token = "alice-token-0123456789"
    operators = {"a": token}
    served = served_api(
        store_url, plugins="http", console=True, console_actions=True, operator_tokens=operators
    )
    hostile = "x%0a2026-12-07%2003:00:00,000%20CRITICAL%20jobhost:%20forged%1b[2J%E2%80%A8"
    with served as (base, _):
        job = {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}}
        assert ask(base, "PUT", "/api/v1/jobs/hooks.a", {**job, "reason": "x"}).status == 201
        client = Client(base)
        client.post("/signin", f"token={token}")
        csrf = csrf_of(client, "/jobs/hooks.a")
        status, _, page = client.post(f"/jobs/{hostile}/pause", f"csrf={csrf}&reason=x")
        assert status == 404 and "no declared job" in page
        assert call(base, "POST", f"/jobs/{hostile}/pause").status == 403  # not signed in
    lines = [r.getMessage() for r in caplog.records if r.name == "jobhost.console"]
    refusals = [line for line in lines if "refused POST" in line]
    assert len(refusals) == 2, lines
    for line in refusals:
        assert not any(c in line for c in "\n\x1b\u2028"), line
        assert "/jobs/x" in line and "\\x1b[2J" in line
    assert "\\n2026-12-07 03:00:00,000 CRITICAL" in refusals[0]
