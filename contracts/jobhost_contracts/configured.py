"""A job declared by an entry of a module's settings section, such as ``[[modules.http.jobs]]``.

Modules whose jobs are written in ``jobhost.toml`` take the same schedule and policy keys and
turn them into a declaration the same way: :func:`configured_declaration` is that way, from plain
values, so every such module reads and declares its entries alike.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobhost_contracts.declaration import (
    POLICY_KEYS,
    BackgroundJobDeclaration,
    policies_from,
)

__all__ = ["CALL_TIMEOUT_MARGIN", "SCHEDULE_KEYS", "configured_declaration"]

CALL_TIMEOUT_MARGIN = timedelta(seconds=5)
"""A run's timeout is its call's plus this: the call gives up first and says why."""

# The timeout follows from the call's; the others are for a module's code to declare.
_NOT_CONFIGURED = frozenset(
    {
        *("timeout", "lease", "overdue_after", "jitter", "retry_on"),
        *("dst_gap", "dst_repeat", "concurrency_group"),
    }
)

SCHEDULE_KEYS = frozenset(POLICY_KEYS) - _NOT_CONFIGURED
"""The keys of an entry about when its job runs and how it is retried, beside ``name``,
``description`` and what the job does."""


def configured_declaration(
    *,
    name: str,
    section: str,
    description: str,
    call_timeout: timedelta,
    **schedule: Any,
) -> BackgroundJobDeclaration:
    """The declaration of one entry of ``[modules.SECTION]``: the job belongs to the module
    ``section``, its configuration source is that section, its run may take ``call_timeout``
    plus :data:`CALL_TIMEOUT_MARGIN`, and ``schedule`` holds its :data:`SCHEDULE_KEYS`."""
    unknown = sorted(set(schedule) - SCHEDULE_KEYS)
    if unknown:
        raise TypeError(
            f"configured_declaration() takes no {', '.join(unknown)}; its schedule keys are "
            f"{', '.join(sorted(SCHEDULE_KEYS))}"
        )
    return BackgroundJobDeclaration(
        name=name,
        module=section,
        configuration_source=section,
        description=description,
        timeout=call_timeout + CALL_TIMEOUT_MARGIN,
        **policies_from(schedule),
    )
