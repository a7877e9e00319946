"""Runtime jobs from the store, joined to the declared catalog, and followed as they change.

A declared job that took a runtime job's name wins it (``runtime-name-taken``), and a stored
runtime job that no longer validates is a problem (``runtime-job-invalid``).

On a change signal, and at the latest a second after the last look (so a signal lost while the
listener reconnected costs a second), the host reads the newest change id; only when it moved
does it read the runtime jobs too (in the same read), and swap the catalog's mapping and the
ticker's.
``jobhost serve`` turns the same reloader on a thread of its own (:class:`RuntimeFollower`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from jobhost.catalog import Catalog, JobSpec, Problem
from jobhost.config import Settings
from jobhost.records import RuntimeJobRow
from jobhost.runtime.definition import FieldProblem, SecretRule, build_spec, parse_definition

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = [
    "RuntimeFollower",
    "RuntimeReloader",
    "SpecCache",
    "declared_jobs",
    "with_runtime_jobs",
]

_CACHE_LIMIT = 10_000


# Checked runtime jobs by (name, version): a job is validated again only when it changed.
SpecCache = dict[tuple[str, int], JobSpec | list[FieldProblem]]


def declared_jobs(catalog: Catalog) -> dict[str, JobSpec]:
    return {name: spec for name, spec in catalog.jobs.items() if name not in catalog.runtime}


def with_runtime_jobs(
    rows: Sequence[RuntimeJobRow],
    catalog: Catalog,
    settings: Settings,
    *,
    cache: SpecCache | None = None,
) -> Catalog:
    """``catalog`` with the stored runtime jobs (``rows``), checked against its kinds and
    declared names; ``cache`` keeps the checked ones of each version."""
    rule = SecretRule.of(settings)
    build = partial(build_spec, kinds=catalog.kinds, modules=settings.modules, secrets=rule)
    specs: dict[str, JobSpec] = {}
    problems = [p for p in catalog.problems if p.code not in _RUNTIME_CODES]
    cache = {} if cache is None else cache
    declared = declared_jobs(catalog)
    for row in rows:
        if row.name in declared:
            module = declared[row.name].module
            problems.append(
                Problem(
                    row.name,
                    module,
                    "runtime-name-taken",
                    f"module {module} declares job {row.name!r}, which is already a runtime job "
                    f"(created by {row.created_by}); rename the declaration, or remove the "
                    f"runtime job with `jobhost jobs delete {row.name} --reason TEXT`",
                )
            )
            continue
        key = (row.name, row.version)
        spec = cache.get(key)
        if spec is None:
            definition = parse_definition(row.definition)
            spec = (
                definition
                if isinstance(definition, list)
                else build(row.name, definition, stored=True)
            )
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()  # bounded: past the limit it starts afresh
            cache[key] = spec
        if isinstance(spec, JobSpec):
            specs[row.name] = spec
        else:
            lines = "; ".join(problem.line() for problem in spec)
            problems.append(
                Problem(
                    row.name,
                    None,
                    "runtime-job-invalid",
                    f"runtime job of kind {row.kind!r} cannot run: {lines}; change it with "
                    f"`jobhost jobs put {row.name} --reason TEXT` or remove it with "
                    "`jobhost jobs delete --reason TEXT`",
                )
            )
    jobs = {**declared, **specs}
    return replace(
        catalog,
        jobs={name: jobs[name] for name in sorted(jobs)},
        problems=problems,
        runtime=frozenset(specs),
        warnings=[w for w in catalog.warnings if not _joined(w, specs.values())],
    )


def _joined(warning: Problem, specs: Iterable[JobSpec]) -> bool:
    """An unused-limit warning about a group that a runtime job joins after all."""
    return warning.code == "unused-concurrency-limit" and any(
        s.concurrency_group is not None
        and warning.message.startswith(f"[concurrency_limits] {s.concurrency_group} = ")
        for s in specs
    )


_RUNTIME_CODES = frozenset({"runtime-name-taken", "runtime-job-invalid"})


_log = logging.getLogger("jobhost.host")
_serve_log = logging.getLogger("jobhost.serve")
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
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._update_jobs = update_jobs
        self._seen = 0
        self._looked = 0.0
        self._cache = SpecCache()
        self._pending = threading.Event()

    def start(self) -> None:
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
        found = self._store.list_runtime_jobs(seen=None if force else self._seen)
        latest = found.change_id
        if latest == self._seen and not force:
            return False
        merged = with_runtime_jobs(found.rows, self._catalog, self._settings, cache=self._cache)
        before = {name: self._catalog.jobs[name] for name in self._catalog.runtime}
        self._catalog.replace_jobs(merged.jobs, merged.runtime)
        self._update_jobs(merged.jobs)
        self._seen = latest
        for problem in merged.problems:
            if problem.code in _RUNTIME_CODES:
                _log.warning("runtime job %s", problem.line())
        after = {name: merged.jobs[name] for name in merged.runtime}
        # The change log moves for every operator action too (a trigger, a pause): only a
        # runtime job that came, went or changed is news to the operator.
        if not force and before != after:
            _log.info(
                "runtime jobs reloaded: %d (added %s, removed %s)",
                len(after),
                ", ".join(sorted(after.keys() - before.keys())) or "none",
                ", ".join(sorted(before.keys() - after.keys())) or "none",
            )
        return True


_TURN_SECONDS = 0.2  # the reloader reads the store only when signalled, or once a second
_WARN_EVERY_SECONDS = 60.0


class RuntimeFollower:
    """Start it after the catalog is loaded; :meth:`stop` ends its threads."""

    def __init__(self, settings: Settings, catalog: Catalog, store: Store) -> None:
        # serve fires nothing: the catalog's own swap is all it needs.
        self._reloader = RuntimeReloader(settings, catalog, store, lambda _jobs: None)
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

    def _follow(self) -> None:
        warned_at: float | None = None
        started = False
        while not self._stopped.wait(_TURN_SECONDS):
            try:
                if started:
                    self._reloader.reload_if_changed()
                else:
                    # No "reloaded" line for jobs there when serve read the catalog.
                    self._reloader.start()
                    started = True
            except Exception as error:  # the store is away: the pages say so; keep looking
                now = time.monotonic()
                if warned_at is None or now - warned_at >= _WARN_EVERY_SECONDS:
                    warned_at = now
                    _serve_log.warning(
                        "cannot read the runtime jobs (%s); the pages keep the last ones read",
                        type(error).__name__,
                    )
            else:
                warned_at = None
