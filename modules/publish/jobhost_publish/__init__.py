"""jobhost module ``publish``: each ``[[modules.publish.jobs]]`` entry of ``jobhost.toml``
becomes a job publishing one JSON message to NATS JetStream or RabbitMQ, confirmed, with the
occurrence's idempotency key. Registered through the ``jobhost`` entry point
(:mod:`jobhost_publish.plugin`); the message format is in docs/operations/publish.md.
"""

from __future__ import annotations

from jobhost_publish.executor import build_executor
from jobhost_publish.settings import PublishSettings

__all__ = ["PublishSettings", "build_executor"]
