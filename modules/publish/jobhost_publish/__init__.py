"""jobhost module ``publish``: scheduled messages to NATS JetStream and RabbitMQ.

Each ``[[modules.publish.jobs]]`` entry of ``jobhost.toml`` becomes a job whose run publishes one
JSON message and waits for the broker to confirm it. Every attempt of one occurrence carries the
same idempotency key (``Nats-Msg-Id`` on NATS, ``message_id`` on RabbitMQ), so a retry after a
lost acknowledgement is recognised as the same message. Registered through the ``jobhost`` entry
point (:mod:`jobhost_publish.plugin`); the message format is in docs/operations/publish.md.
"""

from __future__ import annotations

from jobhost_publish.executor import build_executor
from jobhost_publish.settings import PublishSettings

__all__ = ["PublishSettings", "build_executor"]
