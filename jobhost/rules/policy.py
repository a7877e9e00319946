"""Per-job values the loop needs, read from a declaration with the host's defaults filled in."""

from __future__ import annotations

from datetime import timedelta

from jobhost_contracts import BackgroundJobDeclaration, OverlapPolicy

__all__ = ["lease_for", "may_start"]


def lease_for(declaration: BackgroundJobDeclaration | None, default: timedelta) -> timedelta:
    if declaration is None or declaration.lease is None:
        return default
    return declaration.lease


def may_start(declaration: BackgroundJobDeclaration, live_runs: int, lease_live: bool) -> bool:
    """Whether another run of the job may start now under its overlap policy."""
    if declaration.overlap is OverlapPolicy.FORBID:
        return not lease_live and live_runs == 0
    return live_runs < max(declaration.max_concurrent, 1)
