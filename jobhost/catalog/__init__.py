"""The job catalog: every declared job after overrides, and every problem that stops the host.

:func:`build_catalog` is the one way in; it loads the plugins itself and never raises for a
problem in a plugin or a declaration. ``jobhost validate`` prints :attr:`Catalog.problems`;
``jobhost run`` refuses to start unless :attr:`Catalog.ok`.
"""

from __future__ import annotations

from jobhost.catalog.build import build_catalog
from jobhost.catalog.model import Catalog, EffectiveTrigger, JobSpec, Problem, ProblemCode
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
