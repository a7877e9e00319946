"""Ctrl-C held back between claiming a run and executing it (else the run stays ``running``
until its lease ends). SIGINT's Python handler is swapped, not the main thread's signal mask:
the signal may reach any thread that does not block it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["InterruptHold"]

_Handler = Callable[[int, FrameType | None], Any]


class InterruptHold:
    """SIGINT held from entry until :meth:`deliver` (or the end of the ``with`` block); only on
    the main thread, and only while SIGINT has a Python handler."""

    def __init__(self) -> None:
        self._previous: _Handler | None = None
        self._caught: tuple[int, FrameType | None] | None = None

    def __enter__(self) -> InterruptHold:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._remember)
        return self

    def deliver(self) -> None:
        """Give SIGINT back to its handler; one that came while held is handled now
        (``KeyboardInterrupt`` raised here, for Python's default handler)."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        signal.signal(signal.SIGINT, previous)
        caught, self._caught = self._caught, None
        if caught is not None:
            previous(*caught)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is not None:
            # The block failed on its own: its error says more than an interrupt would, so a
            # Ctrl-C held meanwhile is dropped rather than raised over it.
            self._caught = None
        self.deliver()

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        self._caught = (signum, frame)
