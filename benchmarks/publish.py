"""What one publish run costs, per broker: ``python benchmarks/publish.py``.

Each run of a publish job opens its own connection, publishes one message, waits for the
broker's confirmation and closes (see docs/operations/publish.md). This times ``RUNS`` such runs
against the local NATS JetStream (127.0.0.1:4222) and RabbitMQ (127.0.0.1:5672) servers, in a
stream and a queue of its own that it removes afterwards, and prints the median and the 95th
percentile. A scheduled nudge runs once a night, so the figure that matters is that a run costs
milliseconds, not seconds; the connection per run is what keeps retries and cancellation simple.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
import uuid

import aio_pika
import nats
from jobhost_contracts import Cancellation, JobContext, TriggerSource
from jobhost_publish import PublishSettings, build_executor
from jobhost_publish.executor import Publisher
from jobhost_publish.settings import BrokerUrls
from nats.js.api import StreamConfig

RUNS = 200
NATS_URL = "nats://127.0.0.1:4222"
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"


def main() -> None:
    name = f"jobhost-bench-{uuid.uuid4().hex[:8]}"
    subject = f"jobhost-bench.{name}"
    asyncio.run(_prepare(name, subject))
    try:
        urls = BrokerUrls(nats_url=NATS_URL, rabbitmq_url_env="BENCH_RABBITMQ_URL")
        environ = {"BENCH_RABBITMQ_URL": RABBITMQ_URL}
        targets = {
            "nats": {"broker": "nats", "subject": subject},
            "rabbitmq": {"broker": "rabbitmq", "routing_key": name},
        }
        print(f"one publish run (connect, publish, confirmation, close), {RUNS} runs, ms")
        print(f"{'broker':<10}{'median':>10}{'p95':>10}")
        for broker, target in targets.items():
            executor = build_executor(
                PublishSettings.model_validate({**target, "payload": {"kind": "bench"}}),
                urls,
                environ,
            )
            timings = [_timed(executor, attempt) for attempt in range(1, RUNS + 1)]
            p95 = statistics.quantiles(timings, n=20)[-1]
            print(f"{broker:<10}{statistics.median(timings):>10.2f}{p95:>10.2f}")
    finally:
        asyncio.run(_remove(name))


class _NoState:
    """A publish keeps no job state; the benchmark has no store to give it."""

    def get(self, key: str) -> str | None:
        return None

    def set(self, key: str, value: str) -> None:
        pass

    def record(self, idempotency_key: str) -> bool:
        return True

    def seen(self, idempotency_key: str) -> bool:
        return False


def _timed(executor: Publisher, attempt: int) -> float:
    context = JobContext(
        job_name="bench.publish",
        run_id=f"run-{attempt}",
        occurrence=None,
        attempt=1,
        source=TriggerSource.MANUAL,
        idempotency_key=f"bench.publish:manual:{uuid.uuid4()}",
        fencing_token=1,
        config={},
        logger=logging.getLogger("bench"),
        cancellation=Cancellation(),
        state=_NoState(),
    )
    started = time.perf_counter()
    result = asyncio.run(executor.execute(context))
    elapsed = (time.perf_counter() - started) * 1000
    result.unwrap()
    return elapsed


async def _prepare(name: str, subject: str) -> None:
    client = await nats.connect(NATS_URL)
    await client.jetstream().add_stream(
        StreamConfig(name=name.upper().replace("-", "_"), subjects=[subject])
    )
    await client.close()
    connection = await aio_pika.connect(RABBITMQ_URL)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(name, durable=True)


async def _remove(name: str) -> None:
    client = await nats.connect(NATS_URL)
    await client.jetstream().delete_stream(name.upper().replace("-", "_"))
    await client.close()
    connection = await aio_pika.connect(RABBITMQ_URL)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(name)


if __name__ == "__main__":
    main()
