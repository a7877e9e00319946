"""Publishing to RabbitMQ with ``aio-pika``: one connection per run, persistent, mandatory (a
message no queue takes is a failure) and publisher-confirmed; ``message_id`` carries the run's
idempotency key."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange

from jobhost_publish.errors import (
    BrokerUnavailable,
    NotAcknowledged,
    Redactor,
    Rejected,
    Unroutable,
)
from jobhost_publish.settings import PublishSettings

__all__ = ["APP_ID", "CONTENT_TYPE", "publish_rabbitmq"]

APP_ID = "jobhost"
"""The ``app_id`` property of every message, so a consumer can tell who sent it."""
CONTENT_TYPE = "application/json"


async def publish_rabbitmq(
    job: str, url: str, settings: PublishSettings, body: bytes, *, key: str, redactor: Redactor
) -> None:
    """Publish with ``key`` as ``message_id`` and wait for the broker's confirm; raise a
    :class:`PublishError` otherwise."""
    destination, timeout = settings.destination, settings.timeout.total_seconds()
    connection = await _connect(job, url, timeout, redactor)
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        target = await _exchange(job, channel, settings.exchange or "", destination)
        message = aio_pika.Message(
            body,
            headers=dict(settings.headers),
            content_type=CONTENT_TYPE,
            content_encoding="utf-8",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=key,
            app_id=APP_ID,
            timestamp=datetime.now(UTC),
        )
        await target.publish(message, settings.routing_key or "", mandatory=True, timeout=timeout)
    except aiormq.exceptions.PublishError as error:
        raise Unroutable(job, destination, _returned(error)) from None
    except aiormq.exceptions.DeliveryError:
        raise Rejected(job, destination, "negative acknowledgement (Basic.Nack)") from None
    except TimeoutError:
        raise NotAcknowledged(job, destination, settings.timeout) from None
    except (
        aiormq.exceptions.AMQPError,
        # A channel the dropped connection closed under us.
        aiormq.exceptions.ChannelInvalidStateError,
        OSError,
    ) as error:
        raise BrokerUnavailable(job, "RabbitMQ", redactor(_reason(error))) from None
    finally:
        await _close(connection)


async def _connect(job: str, url: str, timeout: float, redactor: Redactor) -> AbstractConnection:
    try:
        return await aio_pika.connect(url, timeout=timeout)
    except (TimeoutError, aiormq.exceptions.AMQPError, OSError, ValueError) as error:
        raise BrokerUnavailable(job, "RabbitMQ", redactor(_reason(error))) from None


async def _exchange(
    job: str, channel: AbstractChannel, name: str, destination: str
) -> AbstractExchange:
    if name == "":
        return channel.default_exchange
    try:
        # Passive: the exchange is the application's to declare, with its type and bindings.
        return await channel.get_exchange(name, ensure=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        raise Rejected(
            job,
            destination,
            f"exchange {name!r} does not exist; declare it (with its type and bindings) or fix "
            "the exchange setting",
        ) from None


async def _close(connection: AbstractConnection) -> None:
    # The publish's outcome is already decided; a failing close changes nothing about it.
    with contextlib.suppress(aiormq.exceptions.AMQPError, OSError):
        await connection.close()


def _returned(error: aiormq.exceptions.PublishError) -> str:
    frame = getattr(error, "frame", None)
    code = getattr(frame, "reply_code", None)
    text = getattr(frame, "reply_text", None)
    return f"{code} {text}" if code is not None else "Basic.Return"


def _reason(error: BaseException) -> str:
    if isinstance(error, aiormq.exceptions.ProbableAuthenticationError):
        return "credentials refused (ACCESS_REFUSED): check the user and password in the URL"
    if isinstance(error, ConnectionRefusedError) or "Connect call failed" in str(error):
        return "connection refused (is rabbitmq-server running and listening there?)"
    if isinstance(error, TimeoutError):
        return "connecting timed out"
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}"
