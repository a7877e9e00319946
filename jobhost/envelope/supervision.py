"""One thread that watches the executor calls running on their callers' threads.

A host's worker calls the executor itself: handing each run to another thread and waiting for
it costs two thread switches a run, a fair share of a short run's CPU. What the waiting bought
is kept here, for every call at once: a call past its deadline is cancelled (reason
``timeout``), and a call that ignores its cancellation for the grace period is declared stuck
(its ``on_stuck`` is called, from this thread), while its worker stays with it until it ends.

The thread sleeps until the earliest thing it must do: the first deadline, or the end of a
cancelled call's grace. A call that starts or ends does not wake it, unless its deadline is
sooner than the thread's next wake; a cancellation wakes it, so the grace is timed from the
cancellation. A call's cancellation must be a :class:`SupervisedCancellation`, which tells
the thread when it is cancelled.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from jobhost_contracts import Cancellation

__all__ = ["TIMEOUT_REASON", "SupervisedCancellation", "Watch", "release", "watch"]

_log = logging.getLogger("jobhost.envelope")

TIMEOUT_REASON = "timeout"


class SupervisedCancellation(Cancellation):
    """A run's cancellation that tells the supervisor the moment it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self._watch: Watch | None = None

    def cancel(self, reason: str) -> None:
        super().cancel(reason)
        _SUPERVISOR.cancelled(self)


class Watch:
    """One call under watch."""

    __slots__ = ("cancellation", "cancelled_at", "deadline", "grace", "on_stuck", "stuck")

    def __init__(
        self,
        cancellation: SupervisedCancellation,
        deadline: float | None,
        grace: float,
        on_stuck: Callable[[], None],
    ) -> None:
        self.cancellation = cancellation
        self.deadline = deadline
        self.grace = grace
        self.on_stuck = on_stuck
        self.cancelled_at: float | None = None
        self.stuck = False

    def _due(self) -> float:
        """When the supervisor must next look at this call (monotonic)."""
        if self.stuck:
            return math.inf
        if self.cancelled_at is not None:
            return self.cancelled_at + self.grace
        return math.inf if self.deadline is None else self.deadline


def watch(
    cancellation: SupervisedCancellation,
    *,
    timeout: float | None,
    grace: float,
    on_stuck: Callable[[], None],
) -> Watch:
    """Watch a call starting now: cancel it after ``timeout`` seconds, and call ``on_stuck``
    should it still run ``grace`` seconds after its cancellation."""
    deadline = None if timeout is None else time.monotonic() + timeout
    return _SUPERVISOR.watch(Watch(cancellation, deadline, grace, on_stuck))


def release(watched: Watch) -> bool:
    """The call has ended: stop watching it; true if it was declared stuck before it ended."""
    return _SUPERVISOR.release(watched)


class _Supervisor:
    def __init__(self) -> None:
        # Reentrant: a timeout is cancelled under the lock (so a call that has ended is never
        # cancelled after it), and the cancellation tells this supervisor.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._watches: set[Watch] = set()
        self._wake_at = math.inf
        """When the thread next looks by itself (monotonic); -inf while it is looking."""
        self._thread: threading.Thread | None = None

    def watch(self, watched: Watch) -> Watch:
        with self._lock:
            self._watches.add(watched)
            watched.cancellation._watch = watched
            if watched.cancellation.cancelled:
                watched.cancelled_at = time.monotonic()
            self._wake_if_sooner(watched)
        return watched

    def release(self, watched: Watch) -> bool:
        with self._lock:
            self._watches.discard(watched)
            watched.cancellation._watch = None
            return watched.stuck

    def cancelled(self, cancellation: SupervisedCancellation) -> None:
        with self._lock:
            watched = cancellation._watch
            if watched is None or watched.cancelled_at is not None:
                return
            watched.cancelled_at = time.monotonic()
            self._wake_if_sooner(watched)

    def _wake_if_sooner(self, watched: Watch) -> None:
        if watched._due() >= self._wake_at:
            return
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._serve, name="jobhost-supervisor", daemon=True
            )
            self._thread.start()
        self._changed.notify()

    def _serve(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                declared: list[Callable[[], None]] = []
                for watched in [w for w in self._watches if w._due() <= now]:
                    if watched.cancelled_at is None:
                        watched.cancellation.cancel(TIMEOUT_REASON)  # its grace starts now
                    else:
                        watched.stuck = True
                        declared.append(watched.on_stuck)
                if not declared:
                    wake_at = min((w._due() for w in self._watches), default=math.inf)
                    self._wake_at = wake_at
                    self._changed.wait(None if wake_at == math.inf else wake_at - now)
                    self._wake_at = -math.inf
                    continue
            # Outside the lock: ``on_stuck`` is the host's code, and takes the host's locks.
            for on_stuck in declared:
                try:
                    on_stuck()
                except Exception:
                    _log.exception("declaring a run stuck failed")


_SUPERVISOR = _Supervisor()
