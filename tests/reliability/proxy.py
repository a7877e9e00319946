"""A TCP proxy the test owns, between the replicas and the shared PostgreSQL server.

Cutting it is a database outage as the replicas see it: every open connection is closed at once
and every new one is accepted and closed before a byte passes, until it is restored. Hanging it
is a database that stops answering: connections stay open, new ones are accepted, and no byte
passes either way until it is restored (then the held bytes flow on). Orphaning it is a backend
hung behind a live peer (a pooler's, a partition's): it hangs, and the connections open at that
moment never pass a byte again, restored or not, though they stay open; connections made after
the restore work. The shared server itself is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["CutProxy"]

_CHUNK = 65536
_T = TypeVar("_T")


class CutProxy:
    """``127.0.0.1:<port>`` forwarding to ``target``; :meth:`cut` and :meth:`restore` it."""

    def __init__(self, target_host: str = "127.0.0.1", target_port: int = 5432) -> None:
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cut-proxy", daemon=True
        )
        self._writers: set[asyncio.StreamWriter] = set()
        self._cut = False
        self._hung = False
        self._gates: set[asyncio.Event] = set()
        """One per connection: set while its bytes may pass."""
        self._orphans: set[asyncio.Event] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.cuts = 0

    def start(self) -> CutProxy:
        self._thread.start()
        self._server = self._call(self._listen())
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        """Close every connection now and refuse new ones until :meth:`restore`."""
        self._call(self._cut_all())
        self.cuts += 1

    def hang(self) -> None:
        """Stop every byte, both ways, on every connection old and new, until :meth:`restore`."""
        self._call(self._set_flowing(False))

    def orphan(self) -> None:
        """:meth:`hang`, and the connections open now never pass a byte again."""
        self._call(self._orphan_all())

    def restore(self) -> None:
        self._call(self._set_cut(False))
        self._call(self._set_flowing(True))

    @property
    def is_cut(self) -> bool:
        return self._cut

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> CutProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- inside the proxy's event loop ---------------------------------------------------------

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _set_flowing(self, value: bool) -> None:
        self._hung = not value
        for gate in self._gates - self._orphans:
            if value:
                gate.set()
            else:
                gate.clear()

    async def _orphan_all(self) -> None:
        await self._set_flowing(False)
        self._orphans |= self._gates

    async def _set_cut(self, value: bool) -> None:
        self._cut = value

    async def _cut_all(self) -> None:
        self._cut = True
        for writer in list(self._writers):
            _abort(writer)
        self._writers.clear()

    async def _shutdown(self) -> None:
        await self._cut_all()
        if self._server is not None:
            self._server.close()
        # Held bytes, orphans' included, go to the closed sockets: every connection's task ends.
        for gate in self._gates:
            gate.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            _abort(writer)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            _abort(writer)
            return
        pair = {writer, upstream_writer}
        self._writers |= pair
        gate = asyncio.Event()
        if not self._hung:
            gate.set()
        self._gates.add(gate)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await asyncio.gather(
                _pump(reader, upstream_writer, gate),
                _pump(upstream_reader, writer, gate),
                return_exceptions=True,
            )
        finally:
            for each in pair:
                _abort(each)
            self._writers -= pair
            self._gates.discard(gate)
            self._orphans.discard(gate)
            if task is not None:
                self._tasks.discard(task)


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flowing: asyncio.Event
) -> None:
    try:
        while data := await reader.read(_CHUNK):
            await flowing.wait()
            writer.write(data)
            await writer.drain()
    finally:
        _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    # Abort, not close: an outage does not wait for buffers to drain.
    with contextlib.suppress(Exception):
        writer.transport.abort()
