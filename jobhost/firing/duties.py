"""The upkeep a host does beside its fires: small duties, each with an interval, run by one
maintenance thread after the loop's turns, so that the loop only claims and a slow duty never
makes a due run late.

The heartbeat is not a duty: it keeps a thread of its own, so that no duty, however slow (a
pass over many dead runs, a store that answers slowly), ever delays a lease's renewal. The pass
for dead runs made because a lease expired is not one either: it comes before the claim it may
let succeed (see :meth:`~jobhost.firing.tick.Ticker.tick`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from jobhost.firing.tick import Ticker
from jobhost.runtime.reload import RuntimeReloader
from jobhost.store import Store

__all__ = ["AbandonPass", "Duty", "Maintenance", "RuntimeLook"]


class Duty(Protocol):
    name: str
    interval: timedelta

    def run(self, store: Store, now: datetime) -> None: ...


class Maintenance:
    """Runs the duties on one thread until :meth:`stop`, each at most every ``interval`` and only
    after a turn of the loop (see :meth:`turned`): an idle host, whose loop sleeps, is woken by
    nothing but its heartbeat. A duty that fails is said by ``on_failure`` (given its name) and
    tried again at its next interval."""

    def __init__(
        self,
        store: Store,
        duties: Sequence[Duty],
        *,
        now: Callable[[], datetime],
        on_failure: Callable[[str, Exception], None],
    ) -> None:
        self._store = store
        # Each duty's first run is an interval after the start: start-up did what they do.
        started = time.monotonic()
        self._due = [(duty, started + duty.interval.total_seconds()) for duty in duties]
        self._next = min((at for _, at in self._due), default=float("inf"))
        self._now = now
        self._on_failure = on_failure
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobhost-duties", daemon=True)

    def start(self) -> None:
        if self._due:
            self._thread.start()

    def turned(self) -> None:
        """The loop ended a turn: the thread runs the duties now due, once the claims are on
        their way (a turn pays one comparison, and a wake only when a duty is due)."""
        if time.monotonic() >= self._next:
            self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            for index, (duty, at) in enumerate(self._due):
                if at > time.monotonic():
                    continue
                try:
                    duty.run(self._store, self._now())
                except Exception as error:
                    self._on_failure(duty.name, error)
                self._due[index] = (duty, time.monotonic() + duty.interval.total_seconds())
            self._next = min(at for _, at in self._due)


class AbandonPass:
    """Look for dead runs now and then in any case: a corrupt or implausible lease never comes
    first in the order of expiry, so the pass a turn makes for an expired lease may miss it."""

    name = "looking for dead runs"
    interval = timedelta(seconds=10)

    def __init__(self, ticker: Ticker, *, may_run: Callable[[], bool], changed: Callable[[], None]):
        """``may_run``: false for a while after the store comes back (live hosts first renew
        their leases); ``changed`` wakes the loop to claim the retries and leases the pass
        left."""
        self._ticker = ticker
        self._may_run = may_run
        self._changed = changed

    def run(self, store: Store, now: datetime) -> None:
        if self._may_run() and self._ticker.abandon(now):
            self._changed()


class RuntimeLook:
    """Look at the change log at least every second for a runtime job change whose signal was
    lost (a signalled one the loop reads itself, before its claim). The reload swaps the jobs
    the loop fires by, so it holds ``turn_lock``, which the loop holds for each turn."""

    name = "looking for runtime job changes"
    interval = timedelta(seconds=1)

    def __init__(
        self, reloader: RuntimeReloader, *, turn_lock: threading.Lock, changed: Callable[[], None]
    ):
        self._reloader = reloader
        self._turn_lock = turn_lock
        self._changed = changed

    def run(self, store: Store, now: datetime) -> None:
        with self._turn_lock:
            swapped = self._reloader.reload_if_changed()
        if swapped:
            self._changed()
