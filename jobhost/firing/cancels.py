"""Operators' cancel requests, as a host follows them for the runs it holds.

``jobhost cancel`` (the API, the dashboard) writes the request on the run's row and signals
every host. The host's signal watcher marks that something changed; on its next turn the loop
reads, for the runs it holds only, which ones were asked to stop, and sets their cancellation.
No poll of its own: without a signal, nothing is read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from jobhost_contracts import Cancellation

from jobhost.store import Store

__all__ = ["CancelFollower"]

_log = logging.getLogger("jobhost.host")


class CancelFollower:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._signalled = threading.Event()

    def signalled(self) -> None:
        """Something changed in the store: look for cancel requests on the next turn."""
        self._signalled.set()

    def apply(self, held: Mapping[str, Cancellation]) -> dict[str, str]:
        """Cancel the held runs (run id → cancellation) an operator asked to cancel; those
        cancelled now, each with the reason its executor is given."""
        if not self._signalled.is_set():
            return {}
        live = {run_id: c for run_id, c in held.items() if not c.cancelled}
        if not live:
            self._signalled.clear()
            return {}
        asked = self._store.cancel_requests(list(live))
        # Cleared only once read: a turn that failed to read tries again on the next.
        self._signalled.clear()
        for run_id, reason in asked.items():
            _log.info("run %s: cancel asked %s; cancelling it", run_id, reason)
            live[run_id].cancel(reason)
        return asked
