"""Publishing to the real RabbitMQ server on 127.0.0.1:5672 (guest/guest)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jobhost_publish import build_executor
from jobhost_publish.errors import BrokerUnavailable, NotAcknowledged, Rejected, Unroutable
from jobhost_publish.executor import Published, Publisher
from jobhost_publish.plugin import jobhost_jobs
from jobhost_publish.settings import BrokerUrls, PublishSettings
from publish_support import (
    RABBITMQ_URL,
    declare_exchange,
    declare_queue,
    delivered,
    make_context,
    remove,
    silent_server,
    unique,
)
from returns.result import Failure, Result, Success

from tests.ports import free_port

SECRET = "pa55-w0rd-0f-the-br0ker"


def publisher(url: str = RABBITMQ_URL, **settings: Any) -> Publisher:
    return build_executor(
        PublishSettings.model_validate({"broker": "rabbitmq", **settings}),
        BrokerUrls(rabbitmq_url_env="TEST_RABBITMQ_URL"),
        environ={"TEST_RABBITMQ_URL": url},
    )


def run(
    executor: Publisher, job: str = "billing.close-day-queue", **context: Any
) -> Result[Published, Any]:
    return asyncio.run(executor.execute(make_context(job, **context)))


def test_a_publish_arrives_persistent_with_the_documented_body_and_key(queue: str) -> None:
    executor = publisher(
        exchange="", routing_key=queue, payload={"kind": "close-day"}, headers={"X-Source": "a"}
    )
    before = datetime.now(UTC).replace(microsecond=0)

    result = run(executor)

    assert isinstance(result, Success)
    assert result.unwrap().broker == "rabbitmq" and result.unwrap().duplicate is False
    [message] = delivered(queue)
    assert message.body == {
        "kind": "close-day",
        "job": "billing.close-day-queue",
        "occurrence": "2026-12-01T01:00:00Z",
        "run_id": "run-1",
        "attempt": 1,
    }
    properties = message.properties
    assert properties["message_id"] == "billing.close-day-queue:2026-12-01T01:00:00Z"
    assert (properties["content_type"], properties["content_encoding"]) == (
        "application/json",
        "utf-8",
    )
    assert properties["delivery_mode"] == 2  # persistent
    assert properties["app_id"] == "jobhost"
    assert properties["headers"] == {"X-Source": "a"}
    assert before - timedelta(seconds=1) <= properties["timestamp"] <= before + timedelta(minutes=1)


def test_every_attempt_of_one_occurrence_carries_the_same_message_id(queue: str) -> None:
    executor = publisher(routing_key=queue)

    run(executor, attempt=1)
    run(executor, attempt=2)

    # RabbitMQ does not deduplicate: the consumer does, by message_id (docs/operations/publish.md).
    messages = delivered(queue)
    assert [m.body["attempt"] for m in messages] == [1, 2]
    assert {m.properties["message_id"] for m in messages} == {
        "billing.close-day-queue:2026-12-01T01:00:00Z"
    }


def test_a_named_exchange_routes_by_the_routing_key() -> None:
    exchange, queue = unique("jobhost-test-x"), unique("jobhost-test")
    declare_queue(queue, exchange=exchange, routing_key="billing.commands")
    try:
        result = run(publisher(exchange=exchange, routing_key="billing.commands"))
        [message] = delivered(queue)
    finally:
        remove([queue], [exchange])

    assert isinstance(result, Success)
    assert message.body["job"] == "billing.close-day-queue"


def test_an_unroutable_message_fails_instead_of_vanishing() -> None:
    exchange = unique("jobhost-test-x")
    declare_exchange(exchange)
    try:
        unbound = run(publisher(exchange=exchange, routing_key="nobody.listens"))
        no_queue = run(publisher(routing_key=unique("jobhost-test-missing")))
    finally:
        remove([], [exchange])

    for result in (unbound, no_queue):
        assert isinstance(result, Failure) and isinstance(result.failure(), Unroutable)
        assert "312 NO_ROUTE" in str(result.failure())
        assert "no queue is bound" in str(result.failure())
    assert str(unbound.failure()).startswith(
        f"billing.close-day-queue: RabbitMQ exchange {exchange!r}, routing key 'nobody.listens'"
    )


def test_a_missing_exchange_fails_naming_it() -> None:
    missing = unique("jobhost-test-missing")

    result = run(publisher(exchange=missing, routing_key="x"))

    assert isinstance(result, Failure) and isinstance(result.failure(), Rejected)
    assert f"exchange {missing!r} does not exist" in str(result.failure())


def test_a_port_nothing_listens_on_fails_as_broker_unavailable() -> None:
    result = run(publisher(url=f"amqp://guest:guest@127.0.0.1:{free_port()}/", routing_key="q"))

    assert isinstance(result, Failure) and isinstance(result.failure(), BrokerUnavailable)
    assert "RabbitMQ unavailable: connection refused" in str(result.failure())


def test_a_broker_that_never_answers_fails_within_the_timeout() -> None:
    with silent_server() as server:
        executor = publisher(
            url=f"amqp://guest:guest@127.0.0.1:{server.port}/", routing_key="q", timeout="0.5s"
        )
        result = run(executor)

    assert isinstance(result, Failure) and isinstance(result.failure(), NotAcknowledged)
    assert "no acknowledgement within 0.5s" in str(result.failure())


def test_refused_credentials_fail_without_showing_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    executor = publisher(url=f"amqp://guest:{SECRET}@127.0.0.1:5672/", routing_key="q")

    result = run(executor)

    assert isinstance(result, Failure) and isinstance(result.failure(), BrokerUnavailable)
    assert "credentials refused" in str(result.failure())
    shown = [str(result.failure()), repr(result.failure()), repr(executor), caplog.text]
    assert all(SECRET not in text for text in shown)


def test_the_settings_file_path_reads_the_url_from_the_named_variable(
    queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_RABBITMQ_URL", RABBITMQ_URL)
    section = {
        "rabbitmq_url_env": "TEST_RABBITMQ_URL",
        "jobs": [
            {
                "name": "billing.close-day-queue",
                "cron": "0 2 * * *",
                "broker": "rabbitmq",
                "exchange": "",
                "routing_key": queue,
                "payload": {"kind": "close-day"},
            }
        ],
    }
    [(declaration, executor)] = jobhost_jobs(settings={"publish": section})

    result = asyncio.run(executor.execute(make_context(declaration.name)))

    assert isinstance(result, Success)
    assert [m.body["kind"] for m in delivered(queue)] == ["close-day"]
