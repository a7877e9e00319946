"""Publishing to the real NATS JetStream server on 127.0.0.1:4222."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from typing import Any

import pytest
from jobhost_publish.errors import BrokerUnavailable, MissingUrl, NoStream, NotAcknowledged
from jobhost_publish.executor import Published, Publisher
from jobhost_publish.plugin import jobhost_jobs
from publish_support import (
    NATS_URL,
    OCCURRENCE,
    Stream,
    make_context,
    silent_server,
    stored_messages,
    unique,
)
from returns.result import Failure, Result, Success

from jobhost.envelope.envelope import SupervisedCancellation, execute_here
from tests.ports import free_port


def publisher(subject: str, *, url: str = NATS_URL, **entry: Any) -> tuple[str, Publisher]:
    entry = {"name": "billing.close-day", "cron": "0 2 * * *", **entry}
    entry.setdefault("broker", "nats")
    entry.setdefault("subject", subject)
    section = {"nats_url": url, "jobs": [entry]}
    [(declaration, executor)] = jobhost_jobs(settings={"publish": section})
    assert isinstance(executor, Publisher)
    return declaration.name, executor


def run(executor: Publisher, job: str, **context: Any) -> Result[Published, Any]:
    return asyncio.run(executor.execute(make_context(job, **context)))


def test_a_scheduled_publish_is_stored_with_the_documented_body_and_key(stream: Stream) -> None:
    job, executor = publisher(
        stream.subject,
        payload={"kind": "close-day", "ledger": {"day": "2026-11-30", "shards": [1, 2]}},
        headers={"X-Source": "jobhost"},
    )

    result = run(executor, job)

    assert isinstance(result, Success)
    receipt = result.unwrap()
    assert (receipt.broker, receipt.stream, receipt.duplicate) == ("nats", stream.name, False)
    assert receipt.idempotency_key == "billing.close-day:2026-12-01T01:00:00Z"
    [message] = stored_messages(stream)
    assert message.subject == stream.subject
    assert message.headers["Nats-Msg-Id"] == "billing.close-day:2026-12-01T01:00:00Z"
    assert message.headers["X-Source"] == "jobhost"
    assert message.body == {
        "kind": "close-day",
        "ledger": {"day": "2026-11-30", "shards": [1, 2]},
        "job": "billing.close-day",
        "occurrence": "2026-12-01T01:00:00Z",
        "run_id": "run-1",
        "attempt": 1,
    }


def test_a_retried_attempt_of_one_occurrence_is_dropped_by_jetstream_as_a_duplicate(
    stream: Stream,
) -> None:
    job, executor = publisher(stream.subject, payload={"kind": "close-day"})

    first = run(executor, job, attempt=1)
    retry = run(executor, job, attempt=2)
    next_occurrence = run(executor, job, occurrence=OCCURRENCE.replace(day=2))

    assert first.unwrap().duplicate is False
    assert retry.unwrap().duplicate is True
    assert retry.unwrap().sequence == first.unwrap().sequence
    assert next_occurrence.unwrap().duplicate is False
    stored = stored_messages(stream)
    assert [(m.body["attempt"], m.body["occurrence"]) for m in stored] == [
        (1, "2026-12-01T01:00:00Z"),
        (1, "2026-12-02T01:00:00Z"),
    ]


def test_a_subject_no_stream_captures_fails_saying_how_to_create_the_stream() -> None:
    subject = f"jobhost-test.nostream.{unique('s')}"
    job, executor = publisher(subject)

    result = run(executor, job)

    assert isinstance(result, Failure) and isinstance(result.failure(), NoStream)
    text = str(result.failure())
    assert text.startswith("billing.close-day: no JetStream stream captures subject")
    assert subject in text and f"nats stream add BILLING --subjects '{subject}'" in text


def test_a_port_nothing_listens_on_fails_as_broker_unavailable() -> None:
    job, executor = publisher("jobhost-test.down", url=f"nats://127.0.0.1:{free_port()}")

    result = run(executor, job)

    assert isinstance(result, Failure) and isinstance(result.failure(), BrokerUnavailable)
    assert "NATS unavailable: connection refused" in str(result.failure())


def test_a_broker_that_never_answers_fails_within_the_timeout() -> None:
    with silent_server() as server:
        job, executor = publisher(
            "jobhost-test.hangs", url=f"nats://127.0.0.1:{server.port}", timeout="0.5s"
        )
        result = run(executor, job)

    assert isinstance(result, Failure) and isinstance(result.failure(), NotAcknowledged)
    assert "no acknowledgement within 0.5s" in str(result.failure())


def test_the_url_can_come_from_an_environment_variable_read_at_every_run(
    stream: Stream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    section = {
        "nats_url_env": "TEST_NATS_URL",
        "jobs": [{"name": "nudge", "interval": "1h", "broker": "nats", "subject": stream.subject}],
    }
    [(declaration, executor)] = jobhost_jobs(settings={"publish": section})
    monkeypatch.delenv("TEST_NATS_URL", raising=False)

    missing = asyncio.run(executor.execute(make_context(declaration.name)))
    monkeypatch.setenv("TEST_NATS_URL", "nats://s3cr3t-t0ken@127.0.0.1:4222")
    published = asyncio.run(executor.execute(make_context(declaration.name)))

    assert declaration.name == "publish.nudge"
    assert isinstance(missing, Failure) and isinstance(missing.failure(), MissingUrl)
    assert "TEST_NATS_URL" in str(missing.failure()) and "nats_url_env" in str(missing.failure())
    assert isinstance(published, Success)  # the server has no auth: the token is ignored
    assert "s3cr3t-t0ken" not in caplog.text


def test_a_token_in_the_url_never_shows_in_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("TEST_NATS_URL", f"nats://s3cr3t-t0ken@127.0.0.1:{port}")
    section = {
        "nats_url_env": "TEST_NATS_URL",
        "jobs": [{"name": "nudge", "interval": "1h", "broker": "nats", "subject": "a.b"}],
    }
    [(declaration, executor)] = jobhost_jobs(settings={"publish": section})

    result = asyncio.run(executor.execute(make_context(declaration.name)))

    assert isinstance(result, Failure)
    shown = [str(result.failure()), repr(result.failure()), repr(executor), repr(declaration)]
    assert all("s3cr3t-t0ken" not in text for text in shown)


def test_a_cancelled_run_stops_waiting_for_a_hung_broker() -> None:
    with silent_server() as server:
        job, executor = publisher(
            "jobhost-test.hangs", url=f"nats://127.0.0.1:{server.port}", timeout="30s"
        )
        # As a host's worker calls it: its cancellation tells the supervisor.
        context = dataclasses.replace(make_context(job), cancellation=SupervisedCancellation())
        canceller = threading.Timer(0.3, context.cancellation.cancel, args=("shutdown",))
        canceller.start()
        outcome = execute_here(
            executor, context, timeout=None, grace=5, on_stuck=lambda _verdict: None
        )
        canceller.join()

    assert (outcome.outcome, outcome.stuck) == ("cancelled", False)
