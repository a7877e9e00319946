"""Answers the ASGI middlewares write themselves, outside any route.

A middleware that replaces a failed request's answer must know whether the application's own
answer already started (then it can only be cut off): :class:`StartWatch` passes every message
on and remembers the status. :func:`send_answer` writes a whole answer with its length.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from starlette.types import Message, Send

__all__ = ["PROBLEM_JSON", "StartWatch", "json_bytes", "send_answer"]

PROBLEM_JSON = "application/problem+json"


class StartWatch:
    """A ``send`` that forwards every message and remembers the answer's status once it starts.

    ``on_start`` is told the status before the start message leaves, so what it logs is there
    before a client can read the answer.
    """

    def __init__(self, send: Send, on_start: Callable[[int], None] | None = None) -> None:
        self._send = send
        self._on_start = on_start
        self.status = 0

    @property
    def started(self) -> bool:
        return self.status != 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            if self._on_start is not None:
                self._on_start(self.status)
        await self._send(message)


async def send_answer(send: Send, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    """Write a complete answer: ``headers`` (names lower case), its length, then ``body``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *((name.encode(), value.encode()) for name, value in headers.items()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def json_bytes(body: object) -> bytes:
    """``body`` as the UTF-8 JSON the middlewares answer with."""
    return json.dumps(body).encode()
