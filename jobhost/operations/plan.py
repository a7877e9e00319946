"""``jobhost plan``: what a host started with this catalog would change in the store, and which
catalog versions the live hosts run."""

from __future__ import annotations

from typing import Any

from jobhost.catalog import Catalog
from jobhost.operations.timefmt import iso_utc
from jobhost.records import HostRecord, ScheduleRecord, describe_schedule, diff_schedules
from jobhost.rules import catalog_version, desired_schedules
from jobhost.store import Store

__all__ = ["plan_json", "stored_state", "this_catalog"]


def this_catalog(catalog: Catalog) -> str:
    """Runtime jobs change without a deploy: they are not part of a catalog's version."""
    desired = desired_schedules(catalog.jobs)
    return catalog_version([want for want in desired if want.job_name not in catalog.runtime])


def stored_state(store: Store) -> tuple[list[ScheduleRecord], list[HostRecord]]:
    """None of either when the store has no schema yet."""
    if store.current_revision() is None:
        return [], []
    return list(store.list_schedules().values()), store.health_rows(hosts="alive")[1].hosts


def plan_json(
    catalog: Catalog, rows: list[ScheduleRecord], hosts: list[HostRecord]
) -> dict[str, Any]:
    plan = diff_schedules(rows, desired_schedules(catalog.jobs))
    stored = {row.job_name: row for row in rows}
    return {
        "changes": not plan.empty,
        "catalog_version": this_catalog(catalog),
        "hosts": [
            {
                "host": host.id,
                "catalog_version": host.catalog_version,
                "synced_at": iso_utc(host.synced_at),
            }
            for host in hosts
        ],
        "added": [
            {"job": item.job_name, "module": item.module, "after": describe_schedule(item)}
            for item in plan.added
        ],
        "changed": [
            {
                "job": change.job_name,
                "before": "orphaned" if stored[change.job_name].orphaned else change.before,
                "after": change.after,
                "trigger_changed": change.trigger_changed,
            }
            for change in plan.changed
        ],
        "orphaned": [
            {"job": name, "module": stored[name].module, "before": describe_schedule(stored[name])}
            for name in plan.orphaned
        ],
    }
