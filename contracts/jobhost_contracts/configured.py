"""A job declared by an entry of a module's settings section, such as ``[[modules.http.jobs]]``.

Modules whose jobs are written in ``jobhost.toml`` take the same schedule and policy keys and
turn them into a declaration the same way: :func:`configured_declaration` is that way, from plain
values, so every such module reads and declares its entries alike.
"""

from __future__ import annotations

from datetime import timedelta

from jobhost_contracts.declaration import (
    BackgroundJobDeclaration,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
)

__all__ = ["CALL_TIMEOUT_MARGIN", "SCHEDULE_KEYS", "configured_declaration"]

CALL_TIMEOUT_MARGIN = timedelta(seconds=5)
"""A run's timeout is its call's plus this: the call gives up first and says why."""

SCHEDULE_KEYS = frozenset(
    {
        "cron",
        "interval",
        "timezone",
        "enabled",
        "critical",
        "misfire",
        "catch_up_limit",
        "misfire_grace",
        "overlap",
        "max_concurrent",
        "max_attempts",
        "backoff",
        "backoff_max",
    }
)
"""The keys of an entry about when its job runs and how it is retried, beside ``name``,
``description`` and what the job does."""


def configured_declaration(
    *,
    name: str,
    section: str,
    description: str,
    call_timeout: timedelta,
    cron: str | None = None,
    interval: timedelta | None = None,
    timezone: str = "UTC",
    enabled: bool = True,
    critical: bool = False,
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE,
    catch_up_limit: int = 10,
    misfire_grace: timedelta | None = None,
    overlap: OverlapPolicy = OverlapPolicy.FORBID,
    max_concurrent: int = 1,
    max_attempts: int = 1,
    backoff: timedelta = timedelta(seconds=30),
    backoff_max: timedelta = timedelta(hours=1),
) -> BackgroundJobDeclaration:
    """The declaration of one entry of ``[modules.SECTION]``: the job belongs to the module
    ``section``, its configuration source is that section, and its run may take
    ``call_timeout`` plus :data:`CALL_TIMEOUT_MARGIN`."""
    return BackgroundJobDeclaration(
        name=name,
        module=section,
        cron=cron,
        interval=interval,
        timezone=timezone,
        enabled=enabled,
        critical=critical,
        configuration_source=section,
        description=description,
        misfire=misfire,
        catch_up_limit=catch_up_limit,
        misfire_grace=misfire_grace,
        overlap=overlap,
        max_concurrent=max_concurrent,
        retry=RetryPolicy(max_attempts=max_attempts, backoff=backoff, backoff_max=backoff_max),
        timeout=call_timeout + CALL_TIMEOUT_MARGIN,
    )
