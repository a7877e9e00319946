"""The executor of one publish job: build the message, find the broker, publish, confirm.

On both brokers a consumer receives the idempotency key and the ``payload`` with the host's four
fields (docs/operations/publish.md): ``{"kind": "close-day", "job": "billing.close-day",
"occurrence": "2026-12-01T01:00:00Z", "run_id": "0193…", "attempt": 1}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobhost_contracts import JobContext
from returns.result import Failure, Result, Success

from jobhost_publish.errors import MissingUrl, NotAcknowledged, PublishError, Redactor
from jobhost_publish.jetstream import JetStreamAck, publish_jetstream
from jobhost_publish.rabbitmq import publish_rabbitmq
from jobhost_publish.settings import BrokerUrls, PublishSettings

__all__ = ["Published", "Publisher", "body", "build_executor", "occurrence_text"]


def build_executor(
    settings: PublishSettings,
    urls: BrokerUrls,
    environ: Mapping[str, str] | None = None,
) -> Publisher:
    """The executor that publishes as ``settings`` say; ValueError saying what to add when
    ``urls`` lack the broker's address."""
    missing = urls.missing(settings.broker)
    if missing is not None:
        raise ValueError(missing)
    return Publisher(settings, urls, environ)


@dataclass(frozen=True)
class Published:
    """The broker confirmed the message. ``duplicate``: JetStream recognised the idempotency key
    of an earlier attempt and kept the first copy only. ``stream``, ``sequence``: None on
    RabbitMQ."""

    broker: str
    destination: str
    idempotency_key: str
    elapsed_ms: int
    duplicate: bool = False
    stream: str | None = None
    sequence: int | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Publisher:
    """Publishes one message per run as ``settings`` say, to the broker ``urls`` locate;
    ``environ`` (default ``os.environ``, read at every run) holds the URL variables."""

    settings: PublishSettings
    urls: BrokerUrls
    environ: Mapping[str, str] | None = None

    def __repr__(self) -> str:
        return f"Publisher({self.settings.destination})"

    async def execute(self, context: JobContext) -> Result[Published, PublishError]:
        settings = self.settings
        try:
            url = self._url(context.job_name)
            data = body(context, settings.payload)
            context.cancellation.raise_if_cancelled()
            started = time.monotonic()
            published = await self._publish(context, url, data)
        except PublishError as error:
            context.logger.warning("%s", error)
            return Failure(error)
        elapsed_ms = round((time.monotonic() - started) * 1000)
        receipt = Published(
            settings.broker,
            settings.destination,
            context.idempotency_key,
            elapsed_ms,
            **(published._asdict() if published is not None else {}),
        )
        context.logger.info(
            "%s: published to %s with key %s in %d ms%s",
            context.job_name,
            settings.destination,
            context.idempotency_key,
            elapsed_ms,
            " (a duplicate of an earlier attempt: the stream kept the first)"
            if receipt.duplicate
            else "",
        )
        return Success(receipt)

    async def _publish(self, context: JobContext, url: str, body: bytes) -> JetStreamAck | None:
        """JetStream's acknowledgement; None from RabbitMQ, whose confirm carries nothing."""
        settings, job = self.settings, context.job_name
        key, redactor = context.idempotency_key, Redactor(url)
        try:
            # One deadline for connecting, publishing and the acknowledgement together.
            async with asyncio.timeout(settings.timeout.total_seconds()):
                if settings.broker == "nats":
                    return await publish_jetstream(
                        job, url, settings, body, key=key, redactor=redactor
                    )
                await publish_rabbitmq(job, url, settings, body, key=key, redactor=redactor)
                return None
        except TimeoutError:
            raise NotAcknowledged(job, settings.destination, settings.timeout) from None

    def _url(self, job: str) -> str:
        urls, nats = self.urls, self.settings.broker == "nats"
        if nats and urls.nats_url is not None:
            return urls.nats_url
        variable = urls.nats_url_env if nats else urls.rabbitmq_url_env
        # The settings model refuses a broker without a reference; the job kind's factory too.
        assert variable is not None
        environ = os.environ if self.environ is None else self.environ
        value = environ.get(variable, "").strip()
        if not value:
            raise MissingUrl(job, variable, "nats_url_env" if nats else "rabbitmq_url_env")
        return value


def occurrence_text(occurrence: datetime | None) -> str | None:
    """The scheduled instant in UTC as ISO 8601 with ``Z``; None for a manual run."""
    if occurrence is None:
        return None
    return occurrence.astimezone(UTC).isoformat().replace("+00:00", "Z")


def body(context: JobContext, payload: Mapping[str, Any]) -> bytes:
    """The message body: UTF-8 JSON, the payload's fields first, then the host's."""
    document = {
        **payload,
        "job": context.job_name,
        "occurrence": occurrence_text(context.occurrence),
        "run_id": context.run_id,
        "attempt": context.attempt,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
