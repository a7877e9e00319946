"""A few seconds' memory of what the dashboard read, so viewers share reads instead of each
paying for the whole catalog."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ShortCache"]

_V = TypeVar("_V")


class ShortCache(Generic[_V]):
    """Values kept ``seconds`` after they were made, at most ``entries`` of them (the oldest
    made is dropped first)."""

    def __init__(
        self,
        seconds: float,
        entries: int = 32,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = seconds
        self._entries = entries
        self._monotonic = monotonic
        self._items: OrderedDict[Hashable, tuple[float, _V]] = OrderedDict()
        # One maker at a time: ten viewers arriving just after an expiry cost one read, not ten.
        self._lock = threading.Lock()
        self.made = 0
        """How many values were made (what the cache saves is visible in tests)."""

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """The value kept under ``key`` if fresh; else ``make()``'s, kept."""
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and self._monotonic() - kept[0] < self._seconds:
                return kept[1]
            value = make()
            self.made += 1
            self._items[key] = (self._monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > self._entries:
                self._items.popitem(last=False)
            return value

    def clear(self) -> None:
        """Forget everything: the next read sees the store as it is (after an action)."""
        with self._lock:
            self._items.clear()
