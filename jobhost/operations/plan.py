"""``jobhost plan``: what a host started with this catalog would change in the store.

The same comparison the host makes at start (:func:`jobhost.store.registry.diff_schedules`),
without writing: jobs to add, jobs whose trigger, zone or enabled state would change, and jobs
that would be marked orphaned (never deleted).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.rules.desired import desired_schedules
from jobhost.store import ScheduleRecord, current_revision, reading
from jobhost.store.registry import SyncPlan, diff_schedules
from jobhost.store.schema import schedules

__all__ = ["plan_changes", "plan_json", "stored_schedules"]


def plan_changes(catalog: Catalog, rows: list[ScheduleRecord]) -> SyncPlan:
    """The difference between the catalog and the stored ``rows``."""
    return diff_schedules(rows, desired_schedules(catalog.jobs))


def stored_schedules(engine: Engine) -> list[ScheduleRecord]:
    """The store's schedule rows; none when the store has no schema yet."""
    if current_revision(engine) is None:
        return []
    with reading(engine) as connection:
        rows = connection.execute(select(schedules)).mappings()
        return [ScheduleRecord.from_row(r) for r in rows]


def plan_json(plan: SyncPlan, rows: list[ScheduleRecord]) -> dict[str, Any]:
    """``{"changes": bool, "added": [...], "changed": [...], "orphaned": [...]}``."""
    stored = {row.job_name: row for row in rows}
    return {
        "changes": not plan.empty,
        "added": [
            {"job": item.job_name, "module": item.module, "after": item.describe()}
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
            {"job": name, "module": stored[name].module, "before": _describe(stored[name])}
            for name in plan.orphaned
        ],
    }


def _describe(row: ScheduleRecord) -> str:
    if row.trigger_kind == "cron":
        text = f"cron '{row.trigger_expression}' {row.timezone}"
    elif row.trigger_kind == "interval":
        text = f"every {row.trigger_expression}"
    else:
        text = "no trigger"
    return text if row.enabled else f"{text} (disabled)"
