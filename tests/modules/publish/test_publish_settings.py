"""[modules.publish]: declarations, the kind's settings model, and refusals naming entry and key."""

from __future__ import annotations

import importlib.metadata
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest
from jobhost_contracts import MisfirePolicy, OverlapPolicy, RetryPolicy
from jobhost_publish import PublishSettings, build_executor
from jobhost_publish.plugin import jobhost_jobs
from jobhost_publish.settings import BrokerUrls, parse_section
from pydantic import ValidationError

NATS = {"name": "billing.close-day", "cron": "0 2 * * *", "broker": "nats", "subject": "b.c"}
RABBIT = {"name": "close-queue", "cron": "0 2 * * *", "broker": "rabbitmq", "routing_key": "q"}
URLS = {"nats_url": "nats://127.0.0.1:4222", "rabbitmq_url_env": "RABBITMQ_URL"}


def declare(*entries: dict[str, Any], **section: Any) -> list[Any]:
    return jobhost_jobs(settings={"publish": {**URLS, **section, "jobs": list(entries)}})


def refusal(*entries: dict[str, Any], **section: Any) -> str:
    with pytest.raises(ValueError) as raised:
        declare(*entries, **section)
    return str(raised.value)


def test_no_section_declares_nothing() -> None:
    assert jobhost_jobs(settings=MappingProxyType({"http": {}})) == []


def test_the_issue_s_configuration_declares_both_jobs() -> None:
    [(nats, _), (rabbit, _)] = declare(
        {
            **NATS,
            "timezone": "Europe/Berlin",
            "payload": {"kind": "close-day"},
            "headers": {"X-Source": "jobhost"},
            "timeout": "10s",
        },
        {**RABBIT, "name": "billing.close-day-queue", "exchange": "", "routing_key": "billing.q"},
    )

    assert (nats.name, nats.module, nats.configuration_source) == (
        "billing.close-day",
        "publish",
        "publish",
    )
    assert (nats.cron, nats.timezone) == ("0 2 * * *", "Europe/Berlin")
    assert nats.timeout == timedelta(seconds=15)  # the publish's 10s + 5s
    assert nats.description == "publish to NATS subject b.c"
    assert rabbit.name == "billing.close-day-queue"
    assert rabbit.description == (
        "publish to RabbitMQ the default exchange, routing key 'billing.q'"
    )


def test_policies_and_a_short_name() -> None:
    [(declaration, _)] = declare(
        {
            **RABBIT,
            "cron": None,
            "interval": "20m",
            "enabled": False,
            "critical": False,
            "description": "nudges billing",
            "misfire": "skip",
            "misfire_grace": "1m",
            "overlap": "allow",
            "max_concurrent": 2,
            "catch_up_limit": 3,
            "max_attempts": 4,
            "backoff": "5s",
            "backoff_max": "1m",
        }
    )

    assert declaration.name == "publish.close-queue"
    assert declaration.interval == timedelta(minutes=20) and declaration.cron is None
    assert not declaration.enabled and declaration.description == "nudges billing"
    assert (declaration.misfire, declaration.misfire_grace) == (
        MisfirePolicy.SKIP,
        timedelta(minutes=1),
    )
    assert (declaration.overlap, declaration.max_concurrent) == (OverlapPolicy.ALLOW, 2)
    assert declaration.catch_up_limit == 3
    assert declaration.retry == RetryPolicy(
        max_attempts=4, backoff=timedelta(seconds=5), backoff_max=timedelta(minutes=1)
    )


def test_the_host_s_read_only_section_is_accepted() -> None:
    section = MappingProxyType(
        {
            **URLS,
            "jobs": (MappingProxyType({**NATS, "payload": MappingProxyType({"ids": (1, 2)})}),),
        }
    )

    config = parse_section(section)

    assert config.jobs[0].payload == {"ids": [1, 2]}


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ({"broker": "kafka"}, ["jobs[0] 'billing.close-day'", "broker = 'kafka'", "Kafka"]),
        ({"broker": None}, ["jobs[0] 'billing.close-day'", "broker is required"]),
        ({"subject": None}, ["broker = 'nats' needs subject"]),
        ({"subject": "billing.*"}, ["subject = 'billing.*'", "no wildcard"]),
        ({"subject": "billing..day"}, ["subject = 'billing..day'", "no empty token"]),
        ({"subject": "two words"}, ["subject = 'two words'", "no spaces"]),
        ({"routing_key": "x"}, ["broker = 'nats' publishes to a subject", "remove exchange"]),
        ({"colour": "blue"}, ["'colour' is not a known key", "allowed: attempt"[:8]]),
        ({"payload": {"job": "mine"}}, ["payload", "uses job", "rename it"]),
        ({"payload": {"x": float("nan")}}, ["payload", "inf or nan"]),
        ({"payload": "close"}, ["payload", "dictionary"]),
        ({"headers": {"Nats-Msg-Id": "mine"}}, ["headers", "Nats-Msg-Id is set by the host"]),
        ({"headers": {"Bad Name": "x"}}, ["headers", "'Bad Name'", "not a valid header name"]),
        ({"headers": {"X-A": "a\r\nb"}}, ["headers", "'X-A'", "line break"]),
        ({"headers": {"X-A": 5}}, ["headers.X-A", "string"]),
        ({"timeout": "0s"}, ["timeout = '0s'", "positive"]),
        ({"timeout": -5}, ["timeout = -5", "positive"]),
        ({"cron": None}, ["needs cron"]),
        ({"interval": "1h"}, ["both cron and interval"]),
        ({"misfire": "later"}, ["misfire = 'later'", "run_once"]),
        ({"max_attempts": 0}, ["max_attempts = 0", "greater than or equal to 1"]),
        ({"enabled": "yes"}, ["enabled = 'yes'", "boolean"]),
    ],
)
def test_bad_nats_entries_are_refused_naming_the_entry_and_the_key(
    entry: dict[str, Any], fragments: list[str]
) -> None:
    merged = {key: value for key, value in {**NATS, **entry}.items() if value is not None}

    text = refusal(merged)

    assert text.startswith("[modules.publish] 1 problem: modules.publish.jobs[0]")
    for fragment in fragments:
        assert fragment in text


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ({"routing_key": None}, ["broker = 'rabbitmq' needs routing_key"]),
        ({"routing_key": ""}, ["routing_key = ''", "required with the default exchange"]),
        ({"routing_key": "k" * 256}, ["at most 255 bytes"]),
        ({"routing_key": "a\nb"}, ["control characters"]),
        ({"subject": "a.b"}, ["publishes to an exchange", "remove subject"]),
        ({"exchange": "bad name!"}, ["exchange = 'bad name!'", "RabbitMQ exchange name"]),
    ],
)
def test_bad_rabbitmq_entries_are_refused_naming_the_entry_and_the_key(
    entry: dict[str, Any], fragments: list[str]
) -> None:
    merged = {key: value for key, value in {**RABBIT, **entry}.items() if value is not None}

    text = refusal(merged)

    assert "modules.publish.jobs[0] 'close-queue'" in text
    for fragment in fragments:
        assert fragment in text


def test_a_fanout_exchange_may_take_an_empty_routing_key() -> None:
    [(declaration, _)] = declare({**RABBIT, "exchange": "billing", "routing_key": ""})

    assert declaration.name == "publish.close-queue"


@pytest.mark.parametrize(
    ("section", "fragments"),
    [
        ({"nats_url": None}, ["jobs[0] 'billing.close-day'", "broker = 'nats' needs a NATS"]),
        ({"rabbitmq_url_env": None}, ["jobs[1] 'close-queue'", "needs rabbitmq_url_env"]),
        ({"nats_url": "http://h:4222"}, ["nats_url = 'http://h:4222'", "nats://"]),
        ({"nats_url": "nats://h:port"}, ["not a number"]),
        ({"nats_url_env": "NATS_URL"}, ["both nats_url and nats_url_env"]),
        ({"rabbitmq_url_env": "not a var"}, ["rabbitmq_url_env = 'not a var'", "environment"]),
        ({"rabbitmq_url": "amqp://x"}, ["'rabbitmq_url' is not a known key", "rabbitmq_url_env"]),
        ({"jobs": {"name": "x"}}, ["jobs = ", "must be a list of tables"]),
    ],
)
def test_bad_sections_are_refused(section: dict[str, Any], fragments: list[str]) -> None:
    merged = {key: value for key, value in {**URLS, **section}.items() if value is not None}
    merged.setdefault("jobs", [NATS, RABBIT])

    with pytest.raises(ValueError) as raised:
        jobhost_jobs(settings={"publish": merged})

    for fragment in fragments:
        assert fragment in str(raised.value)


def test_a_url_with_credentials_is_refused_without_repeating_them() -> None:
    text = refusal(NATS, nats_url="nats://user:hunter2@h:4222")

    assert "carries credentials" in text and "nats_url_env" in text
    assert "hunter2" not in text and "nats://***@h:4222" in text


def test_every_problem_of_every_entry_is_listed_at_once() -> None:
    text = refusal(
        {**NATS, "broker": "kafka"},
        {**RABBIT, "routing_key": None},
        {**NATS, "subject": "b.*"},
        NATS,
    )

    assert text.startswith("[modules.publish] 5 problems: ")
    for fragment in (
        "jobs[0] 'billing.close-day': broker = 'kafka'",
        "jobs[1] 'close-queue': broker = 'rabbitmq' needs routing_key",
        "jobs[2] 'billing.close-day': name 'billing.close-day' is already used by "
        "modules.publish.jobs[0] | ",
        "jobs[2] 'billing.close-day': subject = 'b.*'",
        "jobs[3] 'billing.close-day': name 'billing.close-day' is already used by "
        "modules.publish.jobs[0]",
    ):
        assert fragment in text


def test_the_kind_settings_model_is_strict_and_publishes_a_schema() -> None:
    settings = PublishSettings.model_validate(
        {"broker": "rabbitmq", "exchange": "billing", "routing_key": "close", "timeout": "2s"}
    )
    schema = PublishSettings.model_json_schema()

    assert settings.timeout == timedelta(seconds=2)
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "broker",
        "subject",
        "exchange",
        "routing_key",
        "payload",
        "headers",
        "timeout",
    }
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        PublishSettings.model_validate({"broker": "nats", "subject": "a", "cron": "* * * * *"})
    with pytest.raises(ValidationError, match="valid string"):
        PublishSettings.model_validate({"broker": "nats", "subject": 5})


def test_the_factory_refuses_a_broker_without_an_address() -> None:
    settings = PublishSettings.model_validate({"broker": "rabbitmq", "routing_key": "q"})

    with pytest.raises(ValueError, match="needs rabbitmq_url_env"):
        build_executor(settings, BrokerUrls(nats_url="nats://127.0.0.1:4222"))
    assert "routing key 'q'" in repr(
        build_executor(settings, BrokerUrls(rabbitmq_url_env="RABBITMQ_URL"))
    )


def test_the_plugin_is_offered_through_the_jobhost_entry_point() -> None:
    offered = {
        point.name: point.value for point in importlib.metadata.entry_points(group="jobhost")
    }

    assert offered.get("publish") == "jobhost_publish.plugin"
