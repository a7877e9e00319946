"""The durable store: schema and migrations, schedules, the run ledger, leases, hosts, state.

SQLite (embedded default) and PostgreSQL (several replicas) behind one set of functions; every
function that writes takes a connection inside the caller's transaction and the instant ``now``.
"""

from __future__ import annotations

from jobhost.store.clock import Clock, SystemClock, database_now
from jobhost.store.engine import create_store_engine, is_postgres, normalise_url, reading
from jobhost.store.migrate import current_revision, head_revision, is_current, upgrade
from jobhost.store.records import HostRecord, RequestRecord, RunRecord, ScheduleRecord
from jobhost.store.state import StoreJobState

__all__ = [
    "Clock",
    "HostRecord",
    "RequestRecord",
    "RunRecord",
    "ScheduleRecord",
    "StoreJobState",
    "SystemClock",
    "create_store_engine",
    "current_revision",
    "database_now",
    "head_revision",
    "is_current",
    "is_postgres",
    "normalise_url",
    "reading",
    "upgrade",
]
