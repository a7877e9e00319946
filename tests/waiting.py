"""Waiting for something to happen: on the condition, with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["wait_for", "wait_for_value"]

_T = TypeVar("_T")


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, *, every: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that; fail naming
    ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def wait_for_value(
    probe: Callable[[], _T | None], timeout: float, what: str, *, every: float = 0.1
) -> _T:
    """Poll ``probe`` until it returns something other than None (``0`` and ``""`` count), and
    return that; fail naming ``what`` once ``timeout`` seconds have passed."""
    found: list[_T] = []

    def seen() -> bool:
        value = probe()
        if value is not None:
            found.append(value)
        return bool(found)

    wait_for(seen, timeout, what, every=every)
    return found[0]
