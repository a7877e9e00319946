"""The real brokers of the development machine, each test with names of its own, and a TCP proxy
a test can cut.

NATS with JetStream on 127.0.0.1:4222 and RabbitMQ on 127.0.0.1:5672 (guest/guest); ``.ci/run``
starts them when they do not answer. Helpers are synchronous: each opens its own connection in
its own event loop, as a consumer in another process would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aio_pika
import nats
from jobhost_contracts import Cancellation, JobContext, TriggerSource
from nats.js.api import StreamConfig

from tests.ports import free_port

NATS_URL = "nats://127.0.0.1:4222"
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"
OCCURRENCE = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def occurrence_key(job: str, occurrence: datetime) -> str:
    """The host's key for an occurrence (``jobhost.firing.tick.occurrence_key``)."""
    return f"{job}:{occurrence.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def make_context(job: str, *, attempt: int = 1, occurrence: datetime = OCCURRENCE) -> JobContext:
    return JobContext(
        job_name=job,
        run_id=f"run-{attempt}",
        occurrence=occurrence,
        attempt=attempt,
        source=TriggerSource.SCHEDULE if attempt == 1 else TriggerSource.RETRY,
        idempotency_key=occurrence_key(job, occurrence),
        fencing_token=attempt,
        config={},
        logger=logging.getLogger(f"jobhost.job.{job}"),
        cancellation=Cancellation(),
        state=_NoState(),
    )


# -- NATS JetStream ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    name: str
    subject: str
    """The one subject the stream captures; tests publish to it."""


@dataclass(frozen=True)
class StoredMessage:
    subject: str
    headers: dict[str, str]
    body: dict[str, Any]


def create_stream(stream: Stream) -> None:
    async def create() -> None:
        client = await nats.connect(NATS_URL)
        try:
            await client.jetstream().add_stream(
                StreamConfig(name=stream.name, subjects=[stream.subject])
            )
        finally:
            await client.close()

    asyncio.run(create())


def delete_stream(stream: Stream) -> None:
    async def delete() -> None:
        client = await nats.connect(NATS_URL)
        try:
            await client.jetstream().delete_stream(stream.name)
        finally:
            await client.close()

    asyncio.run(delete())


def stored_messages(stream: Stream) -> list[StoredMessage]:
    """Every message the stream holds, read as a consumer would, with an ephemeral consumer."""

    async def read() -> list[StoredMessage]:
        client = await nats.connect(NATS_URL)
        try:
            js = client.jetstream()
            info = await js.stream_info(stream.name)
            count = info.state.messages
            if count == 0:
                return []
            subscription = await js.pull_subscribe(stream.subject, stream=stream.name)
            messages = await subscription.fetch(count, timeout=5)
            found = []
            for message in messages:
                await message.ack()
                found.append(
                    StoredMessage(
                        message.subject, dict(message.headers or {}), json.loads(message.data)
                    )
                )
            await subscription.unsubscribe()
            return found
        finally:
            await client.close()

    return asyncio.run(read())


# -- RabbitMQ ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivered:
    body: dict[str, Any]
    properties: dict[str, Any]


def declare_queue(queue: str, exchange: str = "", routing_key: str = "") -> None:
    """A durable queue; with ``exchange``, a direct exchange it is bound to by ``routing_key``."""

    async def declare() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, durable=True)
            if exchange:
                target = await channel.declare_exchange(exchange, aio_pika.ExchangeType.DIRECT)
                await declared.bind(target, routing_key)

    asyncio.run(declare())


def declare_exchange(exchange: str) -> None:
    async def declare() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            channel = await connection.channel()
            await channel.declare_exchange(exchange, aio_pika.ExchangeType.DIRECT)

    asyncio.run(declare())


def remove(queues: list[str], exchanges: list[str]) -> None:
    async def delete() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            channel = await connection.channel()
            for queue in queues:
                await channel.queue_delete(queue)
            for exchange in exchanges:
                await channel.exchange_delete(exchange)

    asyncio.run(delete())


def delivered(queue: str) -> list[Delivered]:
    """Every message waiting in ``queue``, taken off it."""

    async def take() -> list[Delivered]:
        connection = await aio_pika.connect(RABBITMQ_URL)
        found: list[Delivered] = []
        async with connection:
            channel = await connection.channel()
            declared = await channel.get_queue(queue)
            while (message := await declared.get(fail=False)) is not None:
                await message.ack()
                properties = {
                    "content_type": message.content_type,
                    "content_encoding": message.content_encoding,
                    "delivery_mode": message.delivery_mode,
                    "message_id": message.message_id,
                    "app_id": message.app_id,
                    "headers": dict(message.headers),
                    "timestamp": message.timestamp,
                }
                found.append(Delivered(json.loads(message.body), properties))
        return found

    return asyncio.run(take())


# -- failing networks ----------------------------------------------------------------------------


@dataclass
class SilentServer:
    """Accepts connections and never says a word: a broker that hangs."""

    port: int
    _socket: socket.socket
    _accepted: list[socket.socket] = field(default_factory=list)

    def close(self) -> None:
        for connection in self._accepted:
            connection.close()
        _stop_listening(self._socket)


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = SilentServer(listener.getsockname()[1], listener)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                server._accepted.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(5)


class Proxy:
    """A TCP proxy on a port of its own to ``target``; ``cut()`` stops it and closes every
    connection through it, ``restore()`` listens on the same port again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        self._start(self._accept, listener)

    def cut(self) -> None:
        if self._listener is not None:
            _stop_listening(self._listener)
            self._listener = None
        for connection in self._open:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        self._open.clear()
        for thread in self._threads:
            thread.join(5)
        self._threads.clear()

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(self.target)
                self._open.extend([client, upstream])
                self._start(_pipe, client, upstream)
                self._start(_pipe, upstream, client)


def _stop_listening(listener: socket.socket) -> None:
    # shutdown() wakes the thread blocked in accept(); close() alone would not, on Linux.
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _NoState:
    """Publishing keeps no state: any use of it is a bug in the executor."""

    def get(self, key: str) -> str | None:
        raise AssertionError("a publish does not read job state")

    def set(self, key: str, value: str) -> None:
        raise AssertionError("a publish does not write job state")

    def record(self, idempotency_key: str) -> bool:
        raise AssertionError("a publish does not record work")

    def seen(self, idempotency_key: str) -> bool:
        raise AssertionError("a publish does not read recorded work")
