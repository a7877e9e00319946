"""Waiting for something to happen: on the condition, with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_for"]


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
