"""The contracts a module depends on pull in nothing but the standard library, pluggy and returns.

A module author installs ``jobhost-contracts`` to declare a job; if it grew a dependency on the
host's stack (SQLAlchemy, OpenTelemetry, pydantic...), every module would carry it too.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from packaging.requirements import Requirement

# What `returns` itself imports at run time: its one unconditional requirement.
_RETURNS_NEEDS = {"typing_extensions"}
_ALLOWED = {"jobhost_contracts", "pluggy", "returns", *_RETURNS_NEEDS}

_PROBE = """
import json, sys
before = set(sys.modules)
import jobhost_contracts
import jobhost_contracts.cancellation, jobhost_contracts.context, jobhost_contracts.declaration
import jobhost_contracts.executor, jobhost_contracts.hooks
new = {name.partition(".")[0] for name in set(sys.modules) - before}
print(json.dumps(sorted(new - set(sys.stdlib_module_names))))
"""


def test_contracts_import_only_stdlib_pluggy_and_returns() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    third_party = set(json.loads(done.stdout))
    assert third_party <= _ALLOWED, f"jobhost_contracts pulls in {sorted(third_party - _ALLOWED)}"
    assert {"jobhost_contracts", "pluggy", "returns"} <= third_party


def test_the_allowance_for_returns_matches_what_it_requires() -> None:
    # If `returns` gains a requirement, this says so instead of the probe above failing darkly.
    required = {
        Requirement(text).name.replace("-", "_").lower()
        for text in importlib.metadata.requires("returns") or []
        if Requirement(text).marker is None
    }
    assert required == _RETURNS_NEEDS


def test_the_contracts_distribution_requires_only_pluggy_and_returns() -> None:
    required = {
        Requirement(text).name for text in importlib.metadata.requires("jobhost-contracts") or []
    }
    assert required == {"pluggy", "returns"}
