"""The job catalog: every declared job after overrides, and every problem that stops the host.

:func:`build_catalog` is the one way in; it loads the plugins itself and never raises for a
problem in a plugin or a declaration. ``jobhost validate`` prints :attr:`Catalog.problems`;
``jobhost run`` refuses to start unless :attr:`Catalog.ok`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobhost.catalog.model import Catalog, EffectiveTrigger, JobSpec, Problem, ProblemCode

if TYPE_CHECKING:
    from jobhost.catalog.build import build_catalog
    from jobhost.catalog.validation import NAME_PATTERN, NAME_RULE

__all__ = [
    "NAME_PATTERN",
    "NAME_RULE",
    "Catalog",
    "EffectiveTrigger",
    "JobSpec",
    "Problem",
    "ProblemCode",
    "build_catalog",
]


def __getattr__(name: str) -> Any:
    # Building imports the plugin machinery; a command reading the store's catalog never builds.
    if name == "build_catalog":
        from jobhost.catalog.build import build_catalog

        return build_catalog
    if name in ("NAME_PATTERN", "NAME_RULE"):
        from jobhost.catalog import validation

        return getattr(validation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
