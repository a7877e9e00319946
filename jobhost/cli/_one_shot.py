"""A command's own work run in its process, by a host in one-shot mode (see
:mod:`jobhost.firing.oneshot`), when no host is alive to run it.

Ctrl-C is held from the host's start until its first claim is on its workers, so that it
reaches a claimed run wherever it lands. Then a first Ctrl-C is the work's to handle (a run is
cancelled; a backfill claims no more and lets its runs in flight finish); a second one leaves
what is in flight to its lease and ends the command at once (``KeyboardInterrupt``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from jobhost.catalog import Catalog
from jobhost.cli._app import to_stderr
from jobhost.config import Settings
from jobhost.envelope.reporting import configure_telemetry
from jobhost.firing.host import Host
from jobhost.firing.oneshot import BackfillRuns, Claimer, OneShotWork, PendingRuns
from jobhost.operations.runs import Ran, RunHere
from jobhost.rules import FiringRules
from jobhost.store import Store
from jobhost.store.ledger import default_host_id

__all__ = ["backfill_here", "runs_here"]

_POLL_SECONDS = 0.2

_Handler = Callable[[int, FrameType | None], Any]


class InterruptHold:
    """SIGINT held from entry until :meth:`deliver` (or the end of the ``with`` block); only on
    the main thread, and only while SIGINT has a Python handler. Its Python handler is swapped,
    not the main thread's signal mask: the signal may reach any thread that does not block it."""

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

    def __exit__(self, _kind: object, error: BaseException | None, _trace: object) -> None:
        if error is not None:
            # A held Ctrl-C is dropped rather than raised over the block's own error.
            self._caught = None
        self.deliver()

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        self._caught = (signum, frame)


def runs_here(settings: Settings, catalog: Catalog, store: Store) -> RunHere:
    """What runs a command's pending runs (a trigger's, a retry's) in its own process."""

    def run(run_ids: Sequence[str], deadline: float | None) -> Ran:
        by = _claimer(settings, catalog, store)
        work = PendingRuns(by, run_ids)
        timed_out = _run_one_shot(settings, catalog, by, work, deadline)
        return Ran(frozenset(work.taken), timed_out, by.host_id)

    return run


def backfill_here(settings: Settings, catalog: Catalog, store: Store) -> Callable[[str], None]:
    """What runs a backfill in the command's own process until it is finished, or Ctrl-C
    stops its claims and its runs in flight have ended."""

    def run(backfill_id: str) -> None:
        by = _claimer(settings, catalog, store)
        _run_one_shot(settings, catalog, by, BackfillRuns(by, backfill_id), None)

    return run


def _claimer(settings: Settings, catalog: Catalog, store: Store) -> Claimer:
    """Claims as ``cli-<host>``; its progress lines go to stderr."""
    rules = FiringRules(catalog.jobs, settings.lease_duration)
    return Claimer(store, catalog.jobs, f"cli-{default_host_id()}", rules, to_stderr)


def _run_one_shot(
    settings: Settings, catalog: Catalog, by: Claimer, work: OneShotWork, deadline: float | None
) -> bool:
    """Run the work to its end here; true when ``deadline`` (monotonic) cancelled it."""
    ended = threading.Event()
    with InterruptHold() as interrupts:
        telemetry = configure_telemetry()
        telemetry.install_globally()
        host = Host(
            settings,
            catalog,
            by.store,
            clock=by.store.clock,
            host_id=by.host_id,
            telemetry=telemetry,
            one_shot=work,
        )
        host.start()
        host.turn()  # the first claim, on the workers before a Ctrl-C is let through
        threading.Thread(
            target=_loop, args=(host, ended), name="jobhost-one-shot", daemon=True
        ).start()
        timed_out = _supervise(host, work, ended, deadline, interrupts)
    host.shutdown()
    return timed_out


def _loop(host: Host, ended: threading.Event) -> None:
    try:
        host.loop()
    finally:
        ended.set()


def _supervise(
    host: Host,
    work: OneShotWork,
    ended: threading.Event,
    deadline: float | None,
    interrupts: InterruptHold,
) -> bool:
    # Waits on an event, not on Thread.join: a join interrupted by Ctrl-C can leave the thread
    # looking finished while it still runs (CPython before 3.13).
    timed_out = False
    try:
        interrupts.deliver()
        while not ended.wait(_POLL_SECONDS):
            if deadline is not None and not timed_out and time.monotonic() >= deadline:
                timed_out = True
                work.progress("timed out waiting: cancelling the run")
                work.cancel(host.slots, "the operator's --timeout passed")
    except KeyboardInterrupt:
        work.interrupted(host.slots)
        # In short waits, so that a second Ctrl-C is raised here at once, whatever the wait.
        while not ended.wait(_POLL_SECONDS):
            pass
    return timed_out
