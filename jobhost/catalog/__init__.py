"""The job catalog: every declared job after overrides, and every problem that stops the host.
:func:`build_catalog` loads the plugins and never raises for a problem in one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobhost.catalog.model import (
    NAME_PATTERN,
    NAME_RULE,
    Catalog,
    EffectiveTrigger,
    JobSpec,
    Problem,
)

if TYPE_CHECKING:
    from jobhost.catalog.build import build_catalog

__all__ = [
    "NAME_PATTERN",
    "NAME_RULE",
    "Catalog",
    "EffectiveTrigger",
    "JobSpec",
    "Problem",
    "build_catalog",
]


def __getattr__(name: str) -> Any:
    # Building imports the plugin machinery; a command reading the store's catalog never builds.
    if name == "build_catalog":
        from jobhost.catalog.build import build_catalog

        return build_catalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
