"""Cancellation an executor can check, wait on, or await."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["Cancellation", "JobCancelled"]

_T = TypeVar("_T")


class JobCancelled(Exception):
    """Raised by :meth:`Cancellation.raise_if_cancelled`; the host records the run cancelled."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"run cancelled: {reason}")
        self.reason = reason


class Cancellation:
    """Set once by the host (shutdown, lost lease, timeout); read by the executor.

    A long executor checks :attr:`cancelled` between units of work, or waits with
    :meth:`wait` / :meth:`wait_async` instead of sleeping, so a shutdown converges quickly.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why the run was cancelled (``shutdown``, ``lease lost``, ``timeout``), or None."""
        return self._reason

    def cancel(self, reason: str) -> None:
        """Cancel once; later calls keep the first reason."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve, future)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True when cancelled."""
        return self._event.wait(timeout)

    async def wait_async(self) -> None:
        """Return once the run is cancelled, without holding a thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._event.is_set():
                return
            self._waiters.append((loop, future))
        await future

    async def drive(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` as a task that is cancelled when the run is, as the host runs an
        async executor; raises :class:`asyncio.CancelledError` then."""
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self.wait_async())
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            waiter.cancel()
            return task.result()
        task.cancel()
        return await task

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise JobCancelled(self._reason or "cancelled")


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
