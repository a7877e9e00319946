"""Reading a request body with a bound: refused by its ``Content-Length`` before a byte is read,
and cut off as soon as more than the bound has arrived (a chunked body has no length to check).

Nothing of a larger body's size is ever allocated: a 300 MB POST costs the bound, not 300 MB.
"""

from __future__ import annotations

import re

from starlette.requests import Request

__all__ = ["BodyTooLarge", "declared_too_large", "read_capped"]

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
