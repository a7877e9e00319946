"""Publishing to NATS JetStream with ``nats-py``: one connection per run, the ack awaited;
``Nats-Msg-Id`` carries the run's idempotency key."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import NamedTuple

import nats.errors
import nats.js.errors
from nats.aio.client import Client

from jobhost_publish.errors import (
    BrokerUnavailable,
    NoStream,
    NotAcknowledged,
    Redactor,
    Rejected,
)
from jobhost_publish.settings import IDEMPOTENCY_HEADER, PublishSettings

__all__ = ["JetStreamAck", "publish_jetstream"]


class JetStreamAck(NamedTuple):
    stream: str
    sequence: int
    duplicate: bool


async def publish_jetstream(
    job: str, url: str, settings: PublishSettings, body: bytes, *, key: str, redactor: Redactor
) -> JetStreamAck:
    """Publish with ``key`` as ``Nats-Msg-Id`` and wait for the stream's ack; raise a
    :class:`PublishError` otherwise."""
    subject, timeout = settings.subject or "", settings.timeout.total_seconds()
    client = await _connect(job, url, timeout, redactor)
    try:
        ack = await client.jetstream(timeout=timeout).publish(
            subject, body, timeout=timeout, headers={**settings.headers, IDEMPOTENCY_HEADER: key}
        )
    except nats.js.errors.NoStreamResponseError:
        raise NoStream(job, subject) from None
    except nats.js.errors.APIError as error:
        reason = f"JetStream error {error.err_code or error.code}: {error.description}"
        raise Rejected(job, settings.destination, redactor(reason)) from None
    except nats.errors.TimeoutError:
        raise NotAcknowledged(job, settings.destination, settings.timeout) from None
    except (nats.errors.Error, OSError) as error:
        raise BrokerUnavailable(job, "NATS", redactor(_reason(error))) from None
    finally:
        await _close(client)
    return JetStreamAck(ack.stream, ack.seq, bool(ack.duplicate))


async def _connect(job: str, url: str, timeout: float, redactor: Redactor) -> Client:
    seen: list[Exception] = []

    async def remember(error: Exception) -> None:
        # Instead of nats-py's own error log: the failure below says it once, redacted.
        seen.append(error)

    client = Client()
    try:
        await client.connect(
            url,
            name="jobhost-publish",
            connect_timeout=max(1, math.ceil(timeout)),
            # One run, one connection: a broken one is this attempt's failure, and the job's
            # retry policy, not a reconnect loop, decides what happens next. nats-py tries a
            # server at most twice before it gives up with max_reconnect_attempts = 1.
            allow_reconnect=False,
            max_reconnect_attempts=1,
            reconnect_time_wait=0,
            error_cb=remember,
        )
    except (TimeoutError, nats.errors.Error, OSError) as error:
        await _close(client)
        cause = seen[-1] if isinstance(error, nats.errors.NoServersError) and seen else error
        raise BrokerUnavailable(job, "NATS", redactor(_reason(cause))) from None
    except asyncio.CancelledError:
        # The run's deadline or its cancellation, mid-handshake: the socket is ours to close.
        await _close(client)
        raise
    return client


async def _close(client: Client) -> None:
    # The publish's outcome is already decided; a failing close changes nothing about it.
    with contextlib.suppress(nats.errors.Error, OSError):
        await client.close()


def _reason(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is nats-server running and listening there?)"
    if isinstance(error, TimeoutError):
        return "connecting timed out"
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}"
