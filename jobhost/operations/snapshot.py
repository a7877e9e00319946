"""What the report and the health checks read of the store, and which job a name means.

The snapshot itself is one consistent read the store makes (:mod:`jobhost.store.snapshot`).
"""

from __future__ import annotations

from collections.abc import Collection

from jobhost.catalog import Catalog
from jobhost.catalog.model import suggest
from jobhost.errors import UnknownJobError
from jobhost.records import NOT_ATTEMPTS, RECENT, StoreSnapshot
from jobhost.store import Store
from jobhost.store.reports import NEWEST_FIRST
from jobhost.store.snapshot import read_snapshot

__all__ = [
    "NEWEST_FIRST",
    "NOT_ATTEMPTS",
    "RECENT",
    "StoreSnapshot",
    "read_snapshot",
    "require_known_job",
    "resolve_job",
    "stored_job_names",
]


def stored_job_names(store: Store) -> set[str]:
    """Every job name the store knows, from its schedules and its ledger."""
    return store.stored_job_names()


def resolve_job(catalog: Catalog, stored: Collection[str], name: str) -> str:
    """``name`` if the catalog or the store knows it; :class:`UnknownJobError` otherwise."""
    if name in catalog.jobs or name in stored:
        return name
    known = sorted({*catalog.jobs, *stored})
    raise UnknownJobError(name, suggest(name, known))


def require_known_job(catalog: Catalog, store: Store, name: str) -> str:
    """:func:`resolve_job` reading only what it must: the job's own rows, and every name only
    to suggest the closest ones when it is unknown."""
    if name in catalog.jobs:
        return name
    if store.job_is_known(name):
        return name
    return resolve_job(catalog, stored_job_names(store), name)
