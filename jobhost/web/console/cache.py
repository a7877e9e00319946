"""A few seconds' memory of what the dashboard read, so viewers share reads instead of each
paying for the whole catalog."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SLOWER", "ShortCache"]

SLOWER = 10
"""A value that took ``t`` seconds to make is kept at least ``SLOWER * t`` seconds."""

_V = TypeVar("_V")


class ShortCache(Generic[_V]):
    """Values kept ``seconds`` (none with 0) after they were made, or :data:`SLOWER` times as
    long as making one took if that is longer (so making them costs at most a tenth of a CPU
    however many read them); at most ``entries`` of them (the oldest made is dropped first)."""

    def __init__(
        self,
        seconds: float,
        entries: int = 32,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = seconds
        self._entries = entries
        self._monotonic = monotonic
        self._items: OrderedDict[Hashable, tuple[float, _V, float]] = OrderedDict()
        # One maker at a time: ten viewers arriving just after an expiry cost one read, not ten,
        # and while it reads they are answered the value it replaces.
        self._lock = threading.Lock()
        self.made = 0
        """How many values were made (what the cache saves is visible in tests)."""

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """The value kept under ``key`` if fresh; else ``make()``'s, kept. While another
        thread makes a fresh one, a stale value is answered at once rather than waited for."""
        kept = self._items.get(key)
        if kept is not None and self._monotonic() - kept[0] < kept[2]:
            return kept[1]
        if kept is not None and not self._lock.acquire(blocking=False):
            return kept[1]
        if kept is None:
            self._lock.acquire()
        try:
            kept = self._items.get(key)
            if kept is not None and self._monotonic() - kept[0] < kept[2]:
                return kept[1]
            started = self._monotonic()
            value = make()
            self.made += 1
            done = self._monotonic()
            if self._seconds > 0:  # 0: nothing is kept (a benchmark's every read)
                keep = max(self._seconds, SLOWER * (done - started))
                self._items[key] = (done, value, keep)
                self._items.move_to_end(key)
                while len(self._items) > self._entries:
                    self._items.popitem(last=False)
            return value
        finally:
            self._lock.release()

    def clear(self) -> None:
        """Forget everything: the next read sees the store as it is (after an action)."""
        with self._lock:
            self._items.clear()
