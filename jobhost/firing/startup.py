"""A host's start: register this incarnation, write the catalog to the store, say what changed.

Everything here runs before ``/readyz`` answers 200, so it does what the host needs to fire and
no more: a restart with the catalog version the store holds writes no schedule row.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import timedelta
from importlib.metadata import version as package_version

from jobhost.catalog import Catalog
from jobhost.clock import Clock
from jobhost.envelope.lifecycle import retrying_abandoned
from jobhost.envelope.telemetry import Telemetry
from jobhost.firing.tick import Ticker
from jobhost.records import SyncPlan
from jobhost.rules.claiming import FiringRules
from jobhost.store import Store

__all__ = ["register_and_sync"]

_log = logging.getLogger("jobhost.host")


def register_and_sync(
    store: Store,
    ticker: Ticker,
    catalog: Catalog,
    *,
    host_id: str,
    clock: Clock,
    heartbeat: timedelta,
    lease_duration: timedelta,
    telemetry: Telemetry,
    reload_runtime: Callable[[], object],
) -> SyncPlan:
    """Register the host (settling an earlier incarnation's runs), read the runtime jobs,
    write the catalog's schedules and mark the host synced; log and return what changed."""
    store.start_host(
        host_id=host_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        version=package_version("jobhost"),
        clock=clock,
        heartbeat_seconds=max(int(heartbeat.total_seconds()), 1),
        retries_for=retrying_abandoned(
            telemetry, FiringRules(catalog.jobs, lease_duration), why="restarted"
        ),
    )
    reload_runtime()
    plan = ticker.sync(store.now())
    store.mark_synced(host_id, catalog_version=ticker.catalog_version, clock=clock)
    _log_plan(plan)
    return plan


def _log_plan(plan: SyncPlan) -> None:
    for added in plan.added:
        _log.info("plan: add %s (%s)", added.job_name, added.describe())
    for change in plan.changed:
        _log.info("plan: change %s: %s -> %s", change.job_name, change.before, change.after)
    for name in plan.orphaned:
        _log.warning("plan: %s is no longer declared; kept in the store as orphaned", name)
    for name in plan.repaired:
        _log.warning(
            "job %s: stored next occurrence was not one its trigger produces; repaired", name
        )
