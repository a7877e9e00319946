"""Building a summary of every job without the cyclic garbage collector running through it.

A summary of 10,000 jobs makes a few hundred thousand objects, all of them kept (they are the
summary) or freed by reference counting. Each of them would start a collection of the young
generation every 700 allocations and, as they pile up, full collections that walk the whole
heap (a host's catalog included): half of the summary's time, finding nothing to free. Inside
:func:`uncollected` no collection starts; the objects made are looked at once, by the first
collection after it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["uncollected"]


@contextmanager
def uncollected() -> Iterator[None]:
    """No automatic collection while any thread is inside; as it was once all have left
    (a process that turned the collector off keeps it off)."""
    _PAUSE.enter()
    try:
        yield
    finally:
        _PAUSE.leave()


class _Pause:
    """How many threads are inside, and whether the collector ran before the first came in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._was_enabled = False

    def enter(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._inside += 1

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._was_enabled:
                gc.enable()


_PAUSE = _Pause()
