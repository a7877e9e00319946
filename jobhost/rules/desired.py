"""What a catalog asks of the store: one desired schedule row per job, and a version for it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from jobhost.catalog import JobSpec
from jobhost.store.registry import DesiredSchedule

__all__ = ["catalog_version", "desired_schedules"]


def desired_schedules(jobs: Mapping[str, JobSpec]) -> list[DesiredSchedule]:
    return [
        DesiredSchedule(
            job_name=spec.name,
            module=spec.module,
            trigger_kind=spec.trigger.kind,
            trigger_expression=spec.trigger.expression,
            timezone=spec.trigger.timezone,
            trigger_source=spec.trigger.source,
            enabled=spec.enabled,
            schedule_for=spec.schedule,
        )
        for spec in jobs.values()
    ]


def catalog_version(desired: list[DesiredSchedule]) -> str:
    """A short fingerprint of what a catalog asks the store for: equal catalogs, equal version."""
    digest = hashlib.sha256()
    for want in sorted(desired, key=lambda d: d.job_name):
        digest.update(
            "\x1f".join(
                str(part)
                for part in (
                    want.job_name,
                    want.module,
                    want.trigger_kind,
                    want.trigger_expression,
                    want.timezone,
                    want.trigger_source,
                    want.enabled,
                )
            ).encode()
        )
        digest.update(b"\x1e")
    return digest.hexdigest()[:12]
