"""A process without a host (``jobhost serve``) keeping its catalog in step with runtime jobs.

It listens to the same signal as the hosts (:class:`~jobhost.store.signals.SignalWatcher`) and
turns the same :class:`~jobhost.runtime.reload.RuntimeReloader` on a thread of its own: a job
created, changed or deleted through the API shows in ``/report`` and the dashboard within about
a second, as it does on a host. Nothing fires here, so there is no ticker to hand the jobs to.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings
from jobhost.runtime.reload import RuntimeReloader
from jobhost.store import Store

__all__ = ["RuntimeFollower"]

_log = logging.getLogger("jobhost.serve")
_TURN_SECONDS = 0.2
"""How often the thread asks the reloader; it reads the store only when signalled, or once a
second at most otherwise (the reloader's own pace)."""
_WARN_EVERY_SECONDS = 60.0


class RuntimeFollower:
    """Start it after the catalog is loaded; :meth:`stop` ends its threads."""

    def __init__(self, settings: Settings, catalog: Catalog, store: Store) -> None:
        self._reloader = RuntimeReloader(settings, catalog, store, _no_ticker)
        self._watcher = store.signal_watcher(self._reloader.signalled)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="jobhost-runtime", daemon=True)

    def start(self) -> None:
        self._watcher.start()
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._watcher.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def turn(self) -> bool:
        """One look: True when the runtime jobs were read again and swapped in."""
        return self._reloader.reload_if_changed()

    def _follow(self) -> None:
        warned_at: float | None = None
        started = False
        while not self._stopped.wait(_TURN_SECONDS):
            try:
                if started:
                    self.turn()
                else:
                    # The change log's position as it stands: no "reloaded" line for jobs
                    # that were already there when serve read the catalog.
                    self._reloader.start()
                    started = True
            except Exception as error:  # the store is away: the pages say so; keep looking
                now = time.monotonic()
                if warned_at is None or now - warned_at >= _WARN_EVERY_SECONDS:
                    warned_at = now
                    _log.warning(
                        "cannot read the runtime jobs (%s); the pages keep the last ones read",
                        type(error).__name__,
                    )
            else:
                warned_at = None


def _no_ticker(_jobs: Mapping[str, JobSpec]) -> None:
    """``serve`` fires nothing: the catalog's own swap is all it needs."""
