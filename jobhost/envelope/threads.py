"""Daemon threads that run calls one at a time, reused while they are idle.

Starting a thread costs more than a short run, so a thread that finishes a call waits for the
next one; one idle for a minute ends. They are daemon threads: code that never returns (an
executor that ignores its cancellation) cannot hold the process open at exit, as a
``ThreadPoolExecutor``'s threads, joined at exit, would.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["DaemonThreads", "RunningCall"]

_log = logging.getLogger("jobhost.host")
_IDLE_THREAD_SECONDS = 60.0

_Inbox = queue.SimpleQueue["tuple[str, Callable[[], object], RunningCall | None] | None"]


class RunningCall:
    """One call on a reused thread; alive until the call returns."""

    def __init__(self) -> None:
        self._done = threading.Event()

    def is_alive(self) -> bool:
        return not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def _finish(self) -> None:
        self._done.set()


class DaemonThreads:
    """Runs each call on an idle thread of its own, or on a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Inbox] = []
        self._closed = False

    def call(self, name: str, work: Callable[[], object]) -> RunningCall:
        """Start ``work()`` on a thread named ``name`` (for the call's length); the returned
        call says when it has returned."""
        running = RunningCall()
        self._hand(name, work, running)
        return running

    def start(self, name: str, work: Callable[[], object]) -> None:
        """Start ``work()`` as :meth:`call` does, for a caller that does not wait on it."""
        self._hand(name, work, None)

    def close(self) -> None:
        """End the idle threads now, and each busy one when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)

    def _hand(self, name: str, work: Callable[[], object], running: RunningCall | None) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put((name, work, running))

    def _serve(self, inbox: _Inbox) -> None:
        current = threading.current_thread()
        while True:
            try:
                handed = inbox.get(timeout=_IDLE_THREAD_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # handed work just now: it is in the inbox
            if handed is None:
                return
            name, work, running = handed
            current.name = name
            try:
                work()
            except Exception:
                # The thread goes on serving: one that ended here would leave its inbox idle,
                # and the next call handed to it would never run.
                _log.exception("a call on thread %s raised", name)
            finally:
                if running is not None:
                    running._finish()
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._idle.append(inbox)
            if closed:
                return
