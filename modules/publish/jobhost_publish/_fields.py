"""Checks of single values, each returning what is wrong (or None), so a setting and a job kind
can share them and every refusal says what is allowed."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = [
    "IDEMPOTENCY_HEADER",
    "RESERVED_BODY_FIELDS",
    "exchange_problem",
    "header_problem",
    "nats_url_problem",
    "routing_key_problem",
    "subject_problem",
]

IDEMPOTENCY_HEADER = "Nats-Msg-Id"
"""The JetStream header that carries the run's idempotency key; set by the host, never a job."""

RESERVED_BODY_FIELDS = ("job", "occurrence", "run_id", "attempt")
"""Fields the host adds to every message body; a payload may not use them."""

_AMQP_SHORT_STRING = 255  # bytes: exchange names and routing keys are AMQP short strings
_SUBJECT_TOKEN = re.compile(r"[^\s.*>]+")
_EXCHANGE = re.compile(r"[A-Za-z0-9_.:\-]+")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NATS_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})


def subject_problem(subject: str) -> str | None:
    # Wildcards subscribe to many subjects; a message is published to exactly one.
    if any(not _SUBJECT_TOKEN.fullmatch(token) for token in subject.split(".")):
        return (
            "must be one NATS subject to publish to: dot-separated tokens with no spaces, no "
            "empty token and no wildcard (* or >), e.g. 'billing.close-day'"
        )
    return None


def exchange_problem(exchange: str) -> str | None:
    if exchange == "":
        return None
    if len(exchange.encode()) > _AMQP_SHORT_STRING or not _EXCHANGE.fullmatch(exchange):
        return (
            "must be a RabbitMQ exchange name (letters, digits, - _ . :, at most 255 bytes), "
            "or '' for the default exchange"
        )
    return None


def routing_key_problem(routing_key: str, exchange: str) -> str | None:
    if exchange == "" and not routing_key:
        return (
            "is required with the default exchange (exchange = ''): it is the name of the queue "
            "the message goes to"
        )
    if len(routing_key.encode()) > _AMQP_SHORT_STRING:
        return "must be at most 255 bytes (an AMQP short string)"
    if any(not character.isprintable() for character in routing_key):
        return "must not contain control characters or line breaks"
    return None


def header_problem(name: str, value: str) -> str | None:
    if not _HEADER_NAME.fullmatch(name):
        return "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)"
    if name.lower() == IDEMPOTENCY_HEADER.lower():
        return (
            f"{IDEMPOTENCY_HEADER} is set by the host from the run's occurrence, so that a retry "
            "is recognised as the same message: remove it"
        )
    if "\r" in value or "\n" in value:
        return "must not contain a line break"
    return None


def nats_url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in _NATS_SCHEMES or not parts.hostname:
        return "must be a nats://, tls://, ws:// or wss:// URL with a host"
    if "@" in parts.netloc:
        # A user, password or token written into the settings file: secrets by reference only.
        return (
            "carries credentials; put the whole URL in an environment variable and name it "
            "with nats_url_env instead"
        )
    try:
        parts.port  # noqa: B018 (urllib checks the port only when it is read)
    except ValueError:
        return "has a port that is not a number 1-65535"
    return None
