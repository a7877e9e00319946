"""Reading a request body with a bound: refused by its ``Content-Length`` before a byte is read,
and cut off as soon as more than the bound has arrived (a chunked body has no length to check).

Nothing of a larger body's size is ever allocated: a 300 MB POST costs the bound, not 300 MB.

:class:`BodiesFirst` reads each body whole, under a deadline of its own, before the request
asks for one of the ``http_concurrency`` places: a client that sends its body a byte at a time
holds its connection until the deadline, and never a place the dashboard and the API work in.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobhost.web.connections import Refusals
from jobhost.web.middleware import send_answer

__all__ = [
    "BODY_TIMEOUT",
    "MAX_FORM",
    "BodiesFirst",
    "BodyTooLarge",
    "declared_too_large",
    "read_capped",
]

BODY_TIMEOUT = 10.0
"""The default of ``http_body_timeout``, in seconds."""
MAX_FORM = 16_384
"""The largest form the dashboard reads, in bytes."""

_DIGITS = re.compile(r"[0-9]{1,20}")


class BodyTooLarge(Exception):
    """The body is larger than ``limit`` bytes (or says it is)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")
        self.limit = limit


def declared_too_large(request: Request, limit: int) -> bool:
    """True when the request's ``Content-Length`` announces more than ``limit`` bytes (or is
    not a number: the server would not frame such a body anyway)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return False
    declared = declared.strip()
    return not _DIGITS.fullmatch(declared) or int(declared) > limit


async def read_capped(request: Request, limit: int) -> bytes:
    """The whole body, at most ``limit`` bytes; :class:`BodyTooLarge` otherwise."""
    if declared_too_large(request, limit):
        raise BodyTooLarge(limit)
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise BodyTooLarge(limit)
        body.extend(chunk)
    return bytes(body)


class BodiesFirst:
    """ASGI middleware: a request's body read whole within ``seconds`` before ``app`` sees it.

    A body announced larger than ``limit`` is left unread (the application refuses it by its
    length); a chunked one is read up to just past ``limit``, and the application, reading
    on, refuses it. A body not in within ``seconds`` is answered 408 and its connection closed.
    """

    def __init__(self, app: ASGIApp, *, limit: int, seconds: float = BODY_TIMEOUT) -> None:
        self.app = app
        self.limit = limit
        self.seconds = seconds
        self._refusals = Refusals()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._wanted(scope):
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        size = 0
        with anyio.move_on_after(self.seconds) as late:
            while True:
                message = await receive()
                read.append(message)
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if not message.get("more_body", False) or size > self.limit:
                    break
        if late.cancelled_caught:
            self._refusals.refused("body_timeout")
            body = f"the request body did not arrive within {self.seconds:g}s\n".encode()
            headers = {"content-type": "text/plain; charset=utf-8", "connection": "close"}
            await send_answer(send, 408, body, headers)
            return
        await self.app(scope, _replay(read, receive), send)

    def _wanted(self, scope: Scope) -> bool:
        length: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"transfer-encoding":
                return True
            if name == b"content-length":
                length = value
        if length is None:
            return False
        declared = length.decode("latin-1").strip()
        return bool(_DIGITS.fullmatch(declared)) and 0 < int(declared) <= self.limit


def _replay(read: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives the messages already read, then reads on."""
    pending = list(read)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
