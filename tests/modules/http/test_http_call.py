"""Scheduled HTTP calls against a real server on 127.0.0.1."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest
from http_support import OCCURRENCE, Server, make_context
from jobhost_http.call import CallFailed, CallResult, HttpCall, MissingSecret, UnexpectedStatus
from jobhost_http.plugin import jobhost_jobs
from returns.result import Failure, Success

SECRET = "s3cr3t-value-0f-the-t0ken"


def executor_for(**entry: Any) -> tuple[str, HttpCall]:
    entry.setdefault("name", "ping")
    entry.setdefault("interval", "1m")
    [(declaration, executor)] = jobhost_jobs(settings={"http": {"jobs": [entry]}})
    assert isinstance(executor, HttpCall)
    return declaration.name, executor


def test_a_call_sends_the_idempotency_key_of_its_occurrence_on_every_attempt(
    server: Server,
) -> None:
    job, executor = executor_for(url=f"{server.base}/ok", headers={"X-Team": "billing"})

    first = executor.execute(make_context(job, attempt=1))
    retry = executor.execute(make_context(job, attempt=2))

    assert isinstance(first, Success) and isinstance(retry, Success)
    assert [r.headers["Idempotency-Key"] for r in server.received] == [
        "http.ping:2026-11-30T03:17:00Z",
        "http.ping:2026-11-30T03:17:00Z",
    ]
    assert server.received[0].headers["X-Team"] == "billing"
    value = first.unwrap()
    assert isinstance(value, CallResult) and value.status == 200 and value.elapsed_ms >= 0


def test_another_occurrence_gets_another_key(server: Server) -> None:
    job, executor = executor_for(url=f"{server.base}/ok")

    executor.execute(make_context(job))
    executor.execute(make_context(job, occurrence=OCCURRENCE.replace(hour=4)))

    keys = [r.headers["Idempotency-Key"] for r in server.received]
    assert keys[0] != keys[1] and keys[1] == "http.ping:2026-11-30T04:17:00Z"


def test_method_and_body_are_sent(server: Server) -> None:
    job, executor = executor_for(
        url=f"{server.base}/created",
        method="post",
        body='{"hello": "world"}',
        headers={"Content-Type": "application/json"},
    )

    result = executor.execute(make_context(job))

    assert result.unwrap().status == 201
    [request] = server.received
    assert (request.method, request.body) == ("POST", b'{"hello": "world"}')
    assert request.headers["Content-Type"] == "application/json"


def test_an_unexpected_status_fails_with_the_status_and_the_start_of_the_body(
    server: Server,
) -> None:
    job, executor = executor_for(url=f"{server.base}/fail")

    result = executor.execute(make_context(job))

    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, UnexpectedStatus) and error.status == 500
    assert error.body_start.startswith("boom! xxx") and len(error.body_start) == 200
    assert "500" in str(error) and "http.ping" in str(error) and "boom!" in str(error)


def test_expect_status_decides_what_succeeds(server: Server) -> None:
    job, wants_404 = executor_for(url=f"{server.base}/missing", expect_status=[404, 410])
    _, wants_201 = executor_for(url=f"{server.base}/ok", expect_status=201)

    assert wants_404.execute(make_context(job)).unwrap().status == 404
    failed = wants_201.execute(make_context(job))
    assert isinstance(failed, Failure) and failed.failure().status == 200


def test_a_redirect_is_not_followed(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # Following it would hand the secret header to wherever Location points.
    monkeypatch.setenv("PING_TOKEN", SECRET)
    job, executor = executor_for(
        url=f"{server.base}/moved", secret_headers={"X-Token": "PING_TOKEN"}
    )

    result = executor.execute(make_context(job))

    assert isinstance(result, Failure) and result.failure().status == 302
    assert [r.path for r in server.received] == ["/moved"]


def test_a_slow_server_times_out(server: Server) -> None:
    job, executor = executor_for(url=f"{server.base}/slow", timeout="0.5s")

    started = time.monotonic()
    result = executor.execute(make_context(job))

    assert time.monotonic() - started < 3
    assert isinstance(result, Failure) and isinstance(result.failure(), CallFailed)
    assert "timed out after 0.5s" in str(result.failure())


def test_a_refused_connection_fails() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job, executor = executor_for(url=f"http://127.0.0.1:{port}/health")

    result = executor.execute(make_context(job))

    assert isinstance(result, Failure) and isinstance(result.failure(), CallFailed)
    assert "connection refused" in str(result.failure())


def test_a_secret_header_is_sent_but_never_shown(
    server: Server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PING_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    [(declaration, executor)] = jobhost_jobs(
        settings={
            "http": {
                "jobs": [
                    {
                        "name": "ping",
                        "interval": "1m",
                        # The server echoes every header back in a 500 body.
                        "url": f"{server.base}/echo",
                        "secret_headers": {"Authorization": "PING_TOKEN"},
                    }
                ]
            }
        }
    )

    result = executor.execute(make_context(declaration.name))

    assert server.received[0].headers["Authorization"] == SECRET
    assert isinstance(result, Failure)
    shown = [str(result.failure()), repr(result.failure()), caplog.text, repr(executor)]
    shown.append(repr(declaration))
    assert all(SECRET not in text for text in shown)
    assert "***" in str(result.failure())


def test_a_missing_secret_variable_fails_naming_the_variable(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PING_TOKEN", raising=False)
    job, executor = executor_for(
        url=f"{server.base}/ok", secret_headers={"Authorization": "PING_TOKEN"}
    )

    result = executor.execute(make_context(job))

    assert isinstance(result, Failure) and isinstance(result.failure(), MissingSecret)
    assert "PING_TOKEN" in str(result.failure()) and "Authorization" in str(result.failure())
    assert server.received == []


def test_a_secret_is_read_at_call_time(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    job, executor = executor_for(
        url=f"{server.base}/ok", secret_headers={"Authorization": "PING_TOKEN"}
    )
    monkeypatch.setenv("PING_TOKEN", "first")
    executor.execute(make_context(job))
    monkeypatch.setenv("PING_TOKEN", "rotated")
    executor.execute(make_context(job))

    assert [r.headers["Authorization"] for r in server.received] == ["first", "rotated"]
