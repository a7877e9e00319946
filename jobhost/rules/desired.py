"""What a catalog asks of the store: one desired schedule row per job, and a version for it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from jobhost.catalog import JobSpec
from jobhost.catalog.stored import declaration_text
from jobhost.records import DesiredSchedule

__all__ = ["catalog_version", "desired_schedules"]


def desired_schedules(
    jobs: Mapping[str, JobSpec], *, with_declarations: bool = True
) -> list[DesiredSchedule]:
    """One row per job, with its effective declaration unless ``with_declarations`` is false
    (a comparison of triggers only, which need not serialise 10,000 declarations)."""
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
            dst_policy=spec.trigger.dst_policy() if spec.trigger.kind == "cron" else None,
            declaration=declaration_text(spec) if with_declarations else None,
            description=spec.declaration.description,
            critical=spec.declaration.critical,
            job_source="runtime" if spec.trigger.source == "api" else "module",
        )
        for spec in jobs.values()
    ]


def catalog_version(desired: list[DesiredSchedule]) -> str:
    """A short fingerprint of what a catalog asks the store for: equal catalogs, equal version.

    The whole effective declaration is part of it (policies, description, the daylight-saving
    policy): a host that starts with the version the store holds rewrites nothing."""
    digest = hashlib.sha256()
    for want in sorted(desired, key=lambda d: d.job_name):
        parts: list[object] = [
            want.job_name,
            want.module,
            want.trigger_kind,
            want.trigger_expression,
            want.timezone,
            want.trigger_source,
            want.enabled,
        ]
        if want.dst_policy:
            parts.append(want.dst_policy)
        if want.declaration is not None:
            parts.append(want.declaration)
        digest.update("\x1f".join(str(part) for part in parts).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()[:12]
