"""Per-job values the loop needs, read from a declaration with the host's defaults filled in."""

from __future__ import annotations

from datetime import timedelta

from jobhost_contracts import BackgroundJobDeclaration, OverlapPolicy

from jobhost.rules.plan import JobPolicy

__all__ = ["firing_policy", "lease_for", "may_start"]


def firing_policy(declaration: BackgroundJobDeclaration) -> JobPolicy:
    return JobPolicy(
        misfire=declaration.misfire,
        catch_up_limit=declaration.catch_up_limit,
        misfire_grace=declaration.misfire_grace,
        overlap=declaration.overlap,
        max_concurrent=declaration.max_concurrent,
    )


def lease_for(declaration: BackgroundJobDeclaration | None, default: timedelta) -> timedelta:
    if declaration is None or declaration.lease is None:
        return default
    return declaration.lease


def may_start(declaration: BackgroundJobDeclaration, live_runs: int, lease_live: bool) -> bool:
    """Whether another run of the job may start now under its overlap policy."""
    if declaration.overlap is OverlapPolicy.FORBID:
        return not lease_live and live_runs == 0
    return live_runs < max(declaration.max_concurrent, 1)
