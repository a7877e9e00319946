"""What a successful publish returns: the run's value in the ledger and the log."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Published"]


@dataclass(frozen=True)
class Published:
    """The broker confirmed the message.

    ``duplicate`` is True when JetStream recognised the idempotency key from an earlier attempt
    within its duplicate window and kept the first copy only: the occurrence's message is stored
    once, which is the point. ``sequence`` and ``stream`` are JetStream's; None on RabbitMQ.
    """

    broker: str
    destination: str
    idempotency_key: str
    elapsed_ms: int
    duplicate: bool = False
    stream: str | None = None
    sequence: int | None = None
