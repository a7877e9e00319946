"""Kind ``publish``: one message to NATS JetStream or RabbitMQ, for jobs created at run time.

The settings are :class:`PublishSettings` (the message keys of a ``[[modules.publish.jobs]]``
entry); the brokers' addresses stay in ``[modules.publish]``, so a runtime job names a broker
but never carries its URL or a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobhost_contracts import IJobExecutor, JobKind, KindSettingsError
from pydantic import ValidationError

from jobhost_publish.executor import build_executor
from jobhost_publish.settings import SECTION, BrokerUrls, PublishSettings

__all__ = ["publish_kind"]


def publish_kind(urls: BrokerUrls) -> JobKind:
    """The kind, publishing through the brokers ``urls`` name."""

    def validate(settings: Mapping[str, Any]) -> PublishSettings:
        try:
            checked = PublishSettings.model_validate(dict(settings))
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            message = str(first["msg"]).removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                allowed = ", ".join(PublishSettings.model_fields)
                message = f"is not a known key; allowed: {allowed}"
            raise KindSettingsError(field, message) from None
        missing = urls.missing(checked.broker)
        if missing is not None:
            raise KindSettingsError("broker", missing)
        return checked

    def factory(_name: str, settings: PublishSettings) -> IJobExecutor:
        return build_executor(settings, urls)

    return JobKind(
        name="publish",
        description="Publish one message to NATS JetStream or RabbitMQ, confirmed by the broker.",
        settings_schema=PublishSettings.model_json_schema(),
        validate=validate,
        factory=factory,
        module=SECTION,
        examples=({"broker": "nats", "subject": "billing.close-day", "payload": {"day": "x"}},),
    )
