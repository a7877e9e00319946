"""The durable store: schema and migrations, schedules, the run ledger, leases, hosts, state.

SQLite (embedded default) and PostgreSQL (several replicas) behind one set of functions. Code
outside this package holds only the :data:`Engine` handle and calls operations that open their
own transaction (and retry as their :class:`~jobhost.store.retrying.StoreRetry` says); the
functions that take a connection are the store's own building blocks, composed here.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError as StoreError

from jobhost.store.engine import (
    create_store_engine,
    database_now,
    is_postgres,
    normalise_url,
    reading,
    store_now,
)
from jobhost.store.migrate import current_revision, head_revision, is_current, upgrade
from jobhost.store.state import StoreJobState
from jobhost.store.store import Store

__all__ = [
    "Engine",
    "Store",
    "StoreError",
    "StoreJobState",
    "create_store_engine",
    "current_revision",
    "database_now",
    "head_revision",
    "is_current",
    "is_postgres",
    "normalise_url",
    "reading",
    "store_now",
    "upgrade",
]
