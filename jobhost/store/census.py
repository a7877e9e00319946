"""The store's catalog counted, not read whole: what a question about every job needs.

At 10,000 jobs, decoding every schedule row (33 columns, a dozen of them times) only to ask
which jobs are critical and which catalog version the store holds was most of ``jobhost
health``. A :class:`Census` asks for the few columns those questions need and leaves the
counting to the database; the rows of the jobs that matter are then read whole, in the same
transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from jobhost.records import ScheduleRecord
from jobhost.store.reports import list_schedules
from jobhost.store.schema import IS_RUNNING, runs, schedules

__all__ = ["Census", "catalog_versions", "take_census"]


@dataclass(frozen=True)
class Census:
    """The store's catalog at ``now``, read within an open transaction."""

    now: datetime
    declared: list[tuple[str, str | None]]
    """(name, stored declaration) of every live (not orphaned) job, by name."""
    versions: dict[str, int]
    """How many live rows each catalog version stamps (see :func:`catalog_versions`)."""
    held: list[str]
    """The jobs holding a lease that expired before ``now``: their own, or a running run's."""
    _connection: Connection

    def rows(self, names: Collection[str]) -> dict[str, ScheduleRecord]:
        """The whole schedule rows of ``names``, in the same transaction."""
        return list_schedules(self._connection, names) if names else {}


def take_census(connection: Connection, now: datetime) -> Census:
    declared = select(schedules.c.job_name, schedules.c.declaration).where(
        schedules.c.orphaned.is_(False)
    )
    leases = select(schedules.c.job_name).where(
        schedules.c.lease_owner.is_not(None), schedules.c.lease_expires_at < now
    )
    expired = select(runs.c.job_name).where(IS_RUNNING, runs.c.lease_expires_at < now)
    held = {str(name) for name in connection.execute(leases).scalars()}
    held |= {str(name) for name in connection.execute(expired).scalars()}
    return Census(
        now=now,
        declared=sorted((str(name), text) for name, text in connection.execute(declared)),
        versions=catalog_versions(connection),
        held=sorted(held),
        _connection=connection,
    )


def catalog_versions(connection: Connection) -> dict[str, int]:
    """How many live rows each catalog version stamps, runtime jobs aside (a sync stamps the
    version on the rows of the catalog it applied; a runtime job keeps the one it was made
    under)."""
    query = (
        select(schedules.c.catalog_version, func.count())
        .where(
            schedules.c.catalog_version.is_not(None),
            schedules.c.orphaned.is_(False),
            schedules.c.trigger_source != "api",
        )
        .group_by(schedules.c.catalog_version)
    )
    return {str(version): int(count) for version, count in connection.execute(query)}
