"""The settings of the ``publish`` module, as strict pydantic models (TOML has no implicit
conversions, and neither have these), read at start-up."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from jobhost_contracts import (
    MisfirePolicy,
    ModuleSettingsError,
    OverlapPolicy,
    SettingProblem,
    check_trigger,
    env_name,
    positive_duration,
    safe_url,
    thawed,
)
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "IDEMPOTENCY_HEADER",
    "RESERVED_BODY_FIELDS",
    "SECTION",
    "BrokerUrls",
    "PublishConfig",
    "PublishJobSettings",
    "PublishSettings",
    "parse_section",
]

SECTION = "publish"

IDEMPOTENCY_HEADER = "Nats-Msg-Id"
"""The JetStream header that carries the run's idempotency key; set by the host, never a job."""

RESERVED_BODY_FIELDS = ("job", "occurrence", "run_id", "attempt")
"""Fields the host adds to every message body; a payload may not use them."""

BrokerName = Literal["nats", "rabbitmq"]
Duration = Annotated[timedelta, BeforeValidator(positive_duration)]
AtLeastOne = Annotated[int, Field(ge=1)]
# Only text is checked: anything else gets the strict type's refusal, "a valid string".
EnvName = Annotated[
    str, BeforeValidator(lambda value: env_name(value) if isinstance(value, str) else value)
]

_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)
_AMQP_SHORT_STRING = 255  # bytes: exchange names and routing keys are AMQP short strings
_SUBJECT_TOKEN = re.compile(r"[^\s.*>]+")
_EXCHANGE = re.compile(r"[A-Za-z0-9_.:\-]+")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NATS_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})
_SHOWN_LIMIT = 60
# Values that may hold a credential, or are too big to be worth quoting, are never repeated.
_NOT_SHOWN = frozenset({"headers", "payload"})
_HINTS = {
    "rabbitmq_url": "secrets by reference only: put the URL in an environment variable and set "
    "rabbitmq_url_env = 'RABBITMQ_URL' to its name",
    "url": "brokers are addressed in [modules.publish] with nats_url, nats_url_env or "
    "rabbitmq_url_env",
}


class PublishSettings(BaseModel):
    """One message to publish: the broker, where to, what, and how long to wait for the broker.
    The host adds :data:`RESERVED_BODY_FIELDS` to ``payload`` and the idempotency key to
    ``headers``."""

    model_config = _STRICT

    broker: BrokerName
    subject: str | None = None
    exchange: str | None = None
    routing_key: str | None = None
    payload: dict[str, JsonValue] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: Duration = timedelta(seconds=10)

    @field_validator("broker", mode="before")
    @classmethod
    def _known_broker(cls, value: object) -> object:
        if value not in get_args(BrokerName):
            raise ValueError(
                "must be 'nats' (JetStream) or 'rabbitmq'; Kafka is not supported yet "
                "(see docs/operations/publish.md)"
            )
        return value

    @field_validator("subject")
    @classmethod
    def _subject(cls, value: str | None) -> str | None:
        # Wildcards subscribe to many subjects; a message is published to exactly one.
        if value is not None and not all(map(_SUBJECT_TOKEN.fullmatch, value.split("."))):
            raise ValueError(
                "must be one NATS subject to publish to: dot-separated tokens with no spaces, no "
                "empty token and no wildcard (* or >), e.g. 'billing.close-day'"
            )
        return value

    @field_validator("exchange")
    @classmethod
    def _exchange(cls, value: str | None) -> str | None:
        if value and (len(value.encode()) > _AMQP_SHORT_STRING or not _EXCHANGE.fullmatch(value)):
            raise ValueError(
                "must be a RabbitMQ exchange name (letters, digits, - _ . :, at most 255 bytes), "
                "or '' for the default exchange"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            # The header's name only: a misplaced credential must not reach the log.
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(
                    f"header {name!r} is not a valid header name (letters, digits and "
                    "!#$%&'*+-.^_`|~)"
                )
            if name.lower() == IDEMPOTENCY_HEADER.lower():
                raise ValueError(
                    f"header {name!r} {IDEMPOTENCY_HEADER} is set by the host from the run's "
                    "occurrence, so that a retry is recognised as the same message: remove it"
                )
            if "\r" in text or "\n" in text:
                raise ValueError(f"header {name!r} must not contain a line break")
        return value

    @field_validator("payload")
    @classmethod
    def _payload(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        taken = [name for name in RESERVED_BODY_FIELDS if name in value]
        if taken:
            raise ValueError(
                f"uses {', '.join(taken)}, which the host adds to every message "
                f"({', '.join(RESERVED_BODY_FIELDS)}): rename it"
            )
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ValueError("holds inf or nan, which JSON cannot carry") from None
        return value

    @model_validator(mode="after")
    def _destination(self) -> PublishSettings:
        if self.broker == "nats":
            if self.exchange is not None or self.routing_key is not None:
                raise ValueError(
                    "broker = 'nats' publishes to a subject: remove exchange and routing_key"
                )
            if self.subject is None:
                raise ValueError(
                    "broker = 'nats' needs subject, e.g. subject = 'billing.close-day'"
                )
            return self
        if self.subject is not None:
            raise ValueError(
                "broker = 'rabbitmq' publishes to an exchange with a routing key: remove subject"
            )
        key = self.routing_key
        if key is None:
            raise ValueError(
                "broker = 'rabbitmq' needs routing_key (the queue's name with the default exchange "
                "'', e.g. routing_key = 'billing.commands')"
            )
        if not self.exchange and not key:
            problem = (
                "is required with the default exchange (exchange = ''): it is the name of the "
                "queue the message goes to"
            )
        elif len(key.encode()) > _AMQP_SHORT_STRING:
            problem = "must be at most 255 bytes (an AMQP short string)"
        elif not key.isprintable():
            problem = "must not contain control characters or line breaks"
        else:
            return self
        raise ValueError(f"routing_key = {key!r} {problem}")

    @property
    def destination(self) -> str:
        """Where the message goes, as messages and the report name it."""
        if self.broker == "nats":
            return f"NATS subject {self.subject}"
        exchange = self.exchange or ""
        shown = f"exchange {exchange!r}" if exchange else "the default exchange"
        return f"RabbitMQ {shown}, routing key {self.routing_key!r}"


class PublishJobSettings(PublishSettings):
    """One ``[[modules.publish.jobs]]`` entry: a message, its schedule and its policies."""

    name: Annotated[str, Field(min_length=1)]
    cron: str | None = None
    interval: Duration | None = None
    timezone: str = "UTC"
    enabled: bool = True
    critical: bool = False
    description: str = ""
    misfire: MisfirePolicy = Field(MisfirePolicy.RUN_ONCE, strict=False)
    catch_up_limit: AtLeastOne = 10
    misfire_grace: Duration | None = None
    overlap: OverlapPolicy = Field(OverlapPolicy.FORBID, strict=False)
    max_concurrent: AtLeastOne = 1
    max_attempts: AtLeastOne = 1
    backoff: Duration = timedelta(seconds=30)
    backoff_max: Duration = timedelta(hours=1)

    @model_validator(mode="after")
    def _trigger(self) -> PublishJobSettings:
        check_trigger(self.cron, self.interval, enabled=self.enabled, examples=("0 2 * * *", "1h"))
        return self

    @property
    def job_name(self) -> str:
        return _full_name(self.name)


class BrokerUrls(BaseModel):
    """Where the brokers are: ``[modules.publish]`` without its jobs. A URL with credentials is
    given only as the name of an environment variable, read at every run."""

    model_config = _STRICT

    nats_url: str | None = None
    nats_url_env: EnvName | None = None
    rabbitmq_url_env: EnvName | None = None

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in _NATS_SCHEMES or not parts.hostname:
            raise ValueError("must be a nats://, tls://, ws:// or wss:// URL with a host")
        if "@" in parts.netloc:
            # A user, password or token written into the settings file: secrets by reference only.
            raise ValueError(
                "carries credentials; put the whole URL in an environment variable and name it "
                "with nats_url_env instead"
            )
        try:
            parts.port  # noqa: B018 (urllib checks the port only when it is read)
        except ValueError:
            raise ValueError("has a port that is not a number 1-65535") from None
        return value

    @model_validator(mode="after")
    def _one_nats_url(self) -> BrokerUrls:
        if self.nats_url is not None and self.nats_url_env is not None:
            raise ValueError("has both nats_url and nats_url_env; keep one")
        return self

    def missing(self, broker: BrokerName) -> str | None:
        """What to add to ``[modules.publish]`` before ``broker`` can be used, or None."""
        if broker == "nats" and self.nats_url is None and self.nats_url_env is None:
            return (
                "broker = 'nats' needs a NATS address: set nats_url = 'nats://HOST:4222' in "
                "[modules.publish], or nats_url_env = 'NATS_URL' naming an environment variable "
                "that holds it"
            )
        if broker == "rabbitmq" and self.rabbitmq_url_env is None:
            return (
                "broker = 'rabbitmq' needs rabbitmq_url_env = 'RABBITMQ_URL' in "
                "[modules.publish], naming an environment variable that holds the "
                "amqp://USER:PASSWORD@HOST:5672/VHOST URL"
            )
        return None


@dataclass(frozen=True)
class PublishConfig:
    """``[modules.publish]`` checked: where the brokers are, and the jobs in declaration order."""

    urls: BrokerUrls
    jobs: tuple[PublishJobSettings, ...]


def parse_section(section: Mapping[str, Any]) -> PublishConfig:
    """The checked section; raise one ``ValueError`` listing every problem found."""
    raw = thawed(section)
    problems: list[str] = []
    entries = raw.pop("jobs", [])
    urls = BrokerUrls()
    try:
        urls = BrokerUrls.model_validate(raw)
    except ValidationError as error:
        problems.extend(_described("[modules.publish]", error, BrokerUrls.model_fields))
    if not isinstance(entries, list):
        problems.append(
            f"[modules.publish] jobs = {_shown(entries)}: must be a list of tables, written as "
            "[[modules.publish.jobs]]"
        )
        entries = []
    jobs: list[PublishJobSettings] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        where = f"modules.publish.jobs[{index}]"
        if not isinstance(entry, dict):
            problems.append(
                f"{where} = {_shown(entry)}: must be a table ([[modules.publish.jobs]])"
            )
            continue
        name = entry.get("name")
        if isinstance(name, str) and name:
            # Names are compared before anything else is checked: a clash is worth knowing
            # even while the entries have other problems.
            job_name = _full_name(name)
            if job_name in seen:
                problems.append(
                    f"{where} {name!r}: name {job_name!r} is already used by {seen[job_name]}"
                )
            seen.setdefault(job_name, where)
            where = f"{where} {name!r}"
        try:
            job = PublishJobSettings.model_validate(entry)
        except ValidationError as error:
            problems.extend(_described(where, error, PublishJobSettings.model_fields))
            continue
        missing = urls.missing(job.broker)
        if missing is not None:
            problems.append(f"{where}: {missing}")
        jobs.append(job)
    if problems:
        count = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        # A problem of the operator's section: the host reports it as such, not as a plugin's.
        raise ModuleSettingsError(
            SECTION, [SettingProblem(None, None, f"{count}: " + " | ".join(problems))]
        )
    return PublishConfig(urls, tuple(jobs))


def _described(where: str, error: ValidationError, fields: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for detail in error.errors(include_url=False):
        location = [str(part) for part in detail["loc"]]
        key = ".".join(location)
        message = str(detail["msg"]).removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, list(fields), n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            hint = _HINTS.get(key, f"{guess}allowed: {', '.join(sorted(fields))}")
            found.append(f"{where}: {key!r} is not a known key; {hint}")
        elif not location:
            found.append(f"{where}: {message}")
        elif detail["type"] == "missing":
            found.append(f"{where}: {key} is required")
        elif location[0] in _NOT_SHOWN:
            found.append(f"{where}: {key}: {message}")
        else:
            found.append(f"{where}: {key} = {_shown(detail['input'], key)}: {message}")
    return found


def _shown(value: object, key: str = "") -> str:
    if key == "nats_url" and isinstance(value, str):
        value = safe_url(value)
    text = repr(value)
    return text if len(text) <= _SHOWN_LIMIT else f"{text[:_SHOWN_LIMIT]}..."


def _full_name(name: str) -> str:
    return name if "." in name else f"{SECTION}.{name}"
