"""Gauges for what ``jobhost health`` knows, registered on a running host's meter. The store's
figures are read at most once per ``metrics_refresh`` (never a query per job per scrape), and
left out while the store cannot be read (unknown is not zero)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings, redact_text
from jobhost.operations.mismatch import JobFacts, job_mismatches
from jobhost.operations.report import STATUSES, job_status, next_fire_of, state_of
from jobhost.store import Store, StoreError

__all__ = [
    "HostState",
    "JobGauges",
    "RunningHost",
    "StoreFigures",
    "register_gauges",
]

_log = logging.getLogger("jobhost.metrics")


@dataclass(frozen=True)
class StoreFigures:
    live_hosts: int
    by_status: dict[str, int]
    overdue: list[tuple[str, bool]]
    """(job, critical) of every overdue job, by name."""
    skew_seconds: dict[str, float] = field(default_factory=dict)
    """Each live host's clock minus the store's, by host id."""
    failing: list[tuple[str, bool, int]] = field(default_factory=list)
    """(job, critical, streak) of every failing job, by name."""


def register_gauges(meter: Meter, host: RunningHost, gauges: JobGauges | None = None) -> JobGauges:
    gauges = gauges or JobGauges(host)
    of, labels = gauges.of_figures, gauges.job_labels

    def gauge(name: str, callback: _Callback, description: str, unit: str = "") -> None:
        meter.create_observable_gauge(
            f"jobhost.{name}", callbacks=[callback], unit=unit, description=description
        )

    gauge("live_hosts", of(lambda f: [(f.live_hosts, None)]), "Hosts alive in the store", "{host}")
    gauge(
        "jobs",
        of(lambda f: [(f.by_status.get(s, 0), {"status": s}) for s in STATUSES]),
        "Jobs by status, as jobhost report shows them",
        "{job}",
    )
    gauge(
        "critical_jobs.overdue",
        of(lambda f: [(sum(critical for _, critical in f.overdue), None)]),
        "Critical jobs that are overdue",
        "{job}",
    )
    if host.settings.metrics_job_label:
        gauge(
            "job.overdue",
            of(lambda f: [(1, labels(name, critical)) for name, critical in f.overdue]),
            "1 for each overdue job",
        )
        gauge(
            "job.failing",
            of(lambda f: [(1, labels(name, critical)) for name, critical, _ in f.failing]),
            "1 for each job whose newest occurrence failed with no success since",
        )
        gauge(
            "job.failure_streak",
            of(lambda f: [(streak, labels(name, crit)) for name, crit, streak in f.failing]),
            "A failing job's occurrences in a row that failed",
            "{occurrence}",
        )
    skew = of(
        lambda f: [(f.skew_seconds[host.host_id], None)] if host.host_id in f.skew_seconds else []
    )
    gauge("clock.skew", skew, "This host's clock minus the store's, at its last heartbeat", "s")
    gauge(
        "store.up",
        lambda _: [Observation(1 if host.status.store_ok else 0)],
        "1 while this host reaches the store, 0 otherwise",
    )
    gauge(
        "stuck_runs",
        lambda _: [Observation(host.status.stuck)],
        "This host's runs held by executor code that ignored cancellation",
        "{run}",
    )
    return gauges


_Callback = Callable[[CallbackOptions], Iterable[Observation]]


class JobGauges:
    """The gauges' callbacks, over figures read at most once per ``metrics_refresh``."""

    def __init__(self, host: RunningHost, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._host = host
        url = host.settings.dashboard_url
        self._links: dict[str, str] = {"dashboard_url": url} if url else {}
        self._monotonic = monotonic
        self._refresh = host.settings.metrics_refresh.total_seconds()
        self._lock = threading.Lock()
        self._figures: StoreFigures | None = None
        self._read_at: float | None = None

    def figures(self) -> StoreFigures | None:
        """None when the last read failed."""
        with self._lock:
            now = self._monotonic()
            if self._read_at is None or now - self._read_at >= self._refresh:
                host, self._read_at, self._figures = self._host, now, None
                try:
                    self._figures = _read_figures(host.settings, host.catalog, host.store)
                except StoreError as error:
                    first = redact_text(str(error).splitlines()[0])
                    _log.warning("metrics: cannot read the store: %s", first)
            return self._figures

    def of_figures(
        self, values: Callable[[StoreFigures], list[tuple[float, dict[str, str] | None]]]
    ) -> _Callback:
        """A gauge's callback observing ``values`` of the figures; nothing while unknown."""

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            figures = self.figures()
            return [] if figures is None else [Observation(*value) for value in values(figures)]

        return observe

    def job_labels(self, name: str, critical: bool) -> dict[str, str]:
        return {"job": name, "critical": str(critical).lower(), **self._links}


def _read_figures(settings: Settings, catalog: Catalog, store: Store) -> StoreFigures:
    read = store.read_snapshot((), store.clock, recent=False, failing=True)
    now, rows, hosts, failing = read.now, read.schedules, read.hosts, read.failing
    live = [h for h in hosts if h.alive(now)]
    invalid = {p.job for p in catalog.problems if p.job is not None} - set(catalog.jobs)
    by_status: dict[str, int] = dict.fromkeys(STATUSES, 0)
    overdue: list[tuple[str, bool]] = []
    for name in sorted({*catalog.jobs, *rows, *invalid}):
        # From the schedule row alone: it keeps the last outcome and success (no ledger read).
        spec, row = catalog.jobs.get(name), rows.get(name)
        facts = JobFacts(
            name=name,
            spec=spec,
            row=row,
            problems=catalog.problems_for(name),
            next_fire=next_fire_of(spec, row, now),
            last_success=row.last_success_at if row is not None else None,
            expired_runs=(),
        )
        # An empty map of store changes: whether the store's trigger differs is no status.
        codes = [m.code for m in job_mismatches(facts, settings, now, len(live), {})]
        last = row.last_outcome if row is not None else None
        by_status[job_status(state_of(facts), codes, last, running=False)] += 1
        if "overdue" in codes:
            overdue.append((name, spec is not None and spec.declaration.critical))
    return StoreFigures(
        live_hosts=len(live),
        by_status=by_status,
        overdue=overdue,
        skew_seconds={h.id: h.clock_skew_seconds for h in live},
        failing=[
            (name, _critical(catalog.jobs.get(name), found.critical), found.streak)
            for name, found in sorted(failing.items())
        ],
    )


def _critical(spec: JobSpec | None, stored: bool) -> bool:
    # A job this host does not declare (another replica's, a runtime job): the store's word.
    return spec.declaration.critical if spec is not None else stored


# The gauges and the HTTP endpoints see a running host (jobhost.firing.host.Host) through this
# view, so neither imports the firing loop.
class HostState(Protocol):
    started: float
    last_tick: float | None
    catalog_ok: bool
    synced: bool
    store_ok: bool
    stuck: int
    stuck_limit: int
    stall_after: float
    hung_after: float

    @property
    def too_many_stuck(self) -> bool: ...
    def turn_age(self, now: float) -> float: ...


class RunningHost(Protocol):
    @property
    def host_id(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def store(self) -> Store: ...
    @property
    def status(self) -> HostState: ...
