"""The one retry policy for store calls, built on tenacity.

A call that reaches the store is tried again while it fails the way :attr:`StoreRetry.retry_on`
accepts (by default: the store cannot be reached), pausing as :attr:`StoreRetry.waits` says (the
last pause repeats), until it succeeds or the stop rule says enough: a number of tries, a
``give_up`` predicate (a deadline, a host that is stopping), or a ``stopping`` event, which also
cuts a pause short. When it stops, the last error is raised for the caller to judge.

What the operator reads is the same for every call: one warning when an outage starts (or one
per failure, for a call that fails rarely and alone), and one line when the store answers again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from jobhost_contracts import redact_text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["StoreRetry", "is_store_down"]

_log = logging.getLogger("jobhost.store")
_T = TypeVar("_T")


_SQLITE_AWAY = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})
"""An SQLite store's file that cannot be written (a full disk, a failing one): it comes back
when the space or the device does, as a server does after an outage."""


def is_store_down(error: BaseException) -> bool:
    """Whether ``error`` says the store cannot be reached (as opposed to a bad row or statement)."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, OperationalError | InterfaceError):
        return True
    # SQLite's COMMIT is sent by the engine's own commit event, beneath SQLAlchemy's wrapping:
    # a full disk meets it there, as the driver's error.
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and (
        isinstance(code, int) and code & 0xFF in _SQLITE_AWAY
    )


class _Stopped(Exception):
    """The ``stopping`` event was set during a pause."""


@dataclass(frozen=True, kw_only=True)
class StoreRetry:
    """How one kind of store call is retried, and what its failures say in the log.

    The object holds no state of its own: threads may share it, each call retries alone.
    """

    what: str
    """Names the call in the log: ``"heartbeat"``, ``"recording finished runs"``."""
    waits: Sequence[float]
    """Seconds between tries; the last repeats."""
    retry_on: Callable[[BaseException], bool] = is_store_down
    max_attempts: int | None = None
    """Tries in all, the first included; None: no limit."""
    give_up: Callable[[int], bool] | None = None
    """Given the number of tries made, whether to stop now."""
    stopping: threading.Event | None = None
    """Set: stop at once, even during a pause."""
    on_failure: Callable[[BaseException], None] | None = None
    """Called with every error that is retried (e.g. to mark the store lost)."""
    warn: Literal["once", "each"] = "once"
    """Warn once per outage, or at every failure."""

    def call(self, operation: Callable[[], _T], *, what: str | None = None) -> _T:
        """``operation()``, tried again as this policy says; its last error when it stops."""
        # Imported on the first retried call: a command that only reads never makes one.
        from tenacity import Retrying, retry_if_exception, wait_chain, wait_fixed

        name = what or self.what
        last: list[BaseException] = []
        retrying = Retrying(
            retry=retry_if_exception(self.retry_on),
            wait=wait_chain(*(wait_fixed(seconds) for seconds in self.waits or (0.0,))),
            stop=self._stop,
            sleep=self._sleep,
            before_sleep=lambda state: self._failed(name, state, last),
            reraise=True,
        )
        try:
            result = retrying(operation)
        except _Stopped:
            raise last[-1] from None
        if last:
            _log.info("%s: the store answers again after %d failed tries", name, len(last))
        return result

    def _stop(self, state: RetryCallState) -> bool:
        tries = state.attempt_number
        if self.stopping is not None and self.stopping.is_set():
            return True
        if self.max_attempts is not None and tries >= self.max_attempts:
            return True
        return self.give_up is not None and self.give_up(tries)

    def _sleep(self, seconds: float) -> None:
        if self.stopping is None:
            time.sleep(seconds)
        elif self.stopping.wait(seconds):
            raise _Stopped

    def _failed(self, name: str, state: RetryCallState, last: list[BaseException]) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None:
            return
        last.append(error)
        if self.on_failure is not None:
            self.on_failure(error)
        if self.warn == "each" or len(last) == 1:
            first_line = str(error).splitlines()[0] if str(error) else ""
            kind = "store unreachable" if is_store_down(error) else "error"
            pause = state.upcoming_sleep
            _log.warning(
                "%s failed: %s (%s: %s); retrying in %gs",
                name,
                kind,
                type(error).__name__,
                redact_text(first_line),
                pause,
            )
