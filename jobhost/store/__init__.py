"""The durable store: schema and migrations, schedules, the run ledger, leases, hosts, state;
SQLite (embedded default) or PostgreSQL (several replicas) behind one object, :class:`Store`.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError as StoreError

from jobhost.store.engine import create_store_engine, database_now, reading
from jobhost.store.ledger import StoreJobState
from jobhost.store.migrate import check_not_newer, current_revision, head_revision, upgrade
from jobhost.store.store import Store

__all__ = [
    "Store",
    "StoreError",
    "StoreJobState",
    "check_not_newer",
    "create_store_engine",
    "current_revision",
    "database_now",
    "head_revision",
    "reading",
    "upgrade",
]
