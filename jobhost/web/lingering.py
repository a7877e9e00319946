"""HTTP/1.1 over uvicorn's h11 protocol, with the answer of a closing connection kept whole.

A client may still be sending when its connection is to close: an upload answered 413 before it
was read, or bytes after an HTTP/1.0 request (or one with ``Connection: close``) that HTTP gives
no meaning. Closing a socket with unread input makes the kernel reset the connection, and a reset
throws away whatever of the answer has not left yet: the client sees a status line and no body.
So a closing connection first ends its own side (the answer, then FIN), keeps reading and
dropping what still arrives, and closes when the client has finished or after
``LINGER_SECONDS``. Bytes after a request that ends its connection are dropped too, rather than
parsed as a broken second request that uvicorn would answer 400 over the first answer.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["LINGER_SECONDS", "LingeringHttp"]

LINGER_SECONDS = 2.0
"""How long a closing connection waits for its client to stop sending."""


class LingeringHttp(H11Protocol):
    """uvicorn's h11 protocol, closing gently and deaf to bytes after a closing request."""

    _closing: _GentleClose

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn hands ``self.transport`` to each request's cycle, which closes it once the
        # answer is written: the wrapper turns that close into a lingering one.
        self._closing = _GentleClose(transport)
        self.transport = self._closing  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._closing.lingering or self.conn.their_state is h11.MUST_CLOSE:
            return
        super().data_received(data)


class _GentleClose:
    """A transport whose first ``close`` sends FIN after the answer and closes later."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.lingering = False

    def close(self) -> None:
        if self.lingering or self._transport.is_closing() or not self._transport.can_write_eof():
            # A second close (the server stopping) or a transport that cannot half-close.
            self._transport.close()
            return
        self.lingering = True
        try:
            self._transport.write_eof()
        except OSError:  # the client is gone already: nothing to linger for
            self._transport.close()
            return
        # Input paused by flow control would fill the kernel's buffer and stall the client:
        # read on, to drop it.
        self._transport.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_SECONDS, self._transport.close)

    def close_now(self) -> None:
        """Close without lingering: the answer still unsent, and unread input, are lost."""
        self.lingering = True
        self._transport.close()

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)
