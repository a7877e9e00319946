"""A host learning of runtime jobs created, changed or removed while it runs.

Every such change is a row of the change log and a signal to the hosts (NOTIFY on PostgreSQL,
the signal counter on SQLite). On a signal, and at the latest a second after the last look (a
signal sent while a host was starting, or while its listener reconnected, is not lost), the host
reads the newest change id: one read through the primary key. Only when it moved does it read
the runtime jobs again and swap the catalog's mapping and the ticker's. The catalog itself is
never compared on a turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings
from jobhost.runtime.loading import SpecCache, check_runtime_jobs, with_runtime_jobs
from jobhost.runtime.secrets import SecretRule
from jobhost.store import Store

__all__ = ["RuntimeReloader"]

_log = logging.getLogger("jobhost.host")
_LOOK_AT_LEAST_EVERY = 1.0


class RuntimeReloader:
    """Keeps one host's catalog and ticker in step with the store's runtime jobs."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        update_jobs: Callable[[Mapping[str, JobSpec]], None],
    ) -> None:
        """``update_jobs`` hands the merged job mapping to the loop (the ticker's)."""
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._update_jobs = update_jobs
        self._seen = 0
        self._looked = 0.0
        self._cache = SpecCache()
        self._pending = threading.Event()

    def start(self) -> None:
        """Read the change log's position and the runtime jobs as the host starts."""
        self._pending.set()
        self.reload_if_changed(force=True)

    def signalled(self) -> None:
        self._pending.set()

    def reload_if_changed(self, *, force: bool = False, signalled_only: bool = False) -> bool:
        """Reload when signalled (or a second after the last look, unless ``signalled_only``)
        and the change log moved; True when the jobs were swapped."""
        due = not signalled_only and time.monotonic() - self._looked >= _LOOK_AT_LEAST_EVERY
        if not (self._pending.is_set() or due):
            return False
        self._pending.clear()
        self._looked = time.monotonic()
        latest, rows = self._store.changed_runtime_jobs(self._seen, force=force)
        if rows is None:
            return False
        runtime = check_runtime_jobs(
            rows,
            self._catalog,
            self._settings.modules,
            secrets=SecretRule.of(self._settings),
            cache=self._cache,
        )
        merged = with_runtime_jobs(self._catalog, runtime)
        before = set(self._catalog.runtime)
        self._catalog.replace_jobs(merged.jobs, merged.runtime)
        self._update_jobs(merged.jobs)
        self._seen = latest
        for problem in runtime.problems:
            _log.warning("runtime job %s", problem.line())
        after = set(merged.runtime)
        if not force and (before != after or latest):
            _log.info(
                "runtime jobs reloaded: %d (added %s, removed %s)",
                len(after),
                ", ".join(sorted(after - before)) or "none",
                ", ".join(sorted(before - after)) or "none",
            )
        return True
