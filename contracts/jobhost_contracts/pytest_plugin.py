"""The ``run_job`` pytest fixture, registered through the ``pytest11`` entry point of
``jobhost-contracts``: installing the contracts is all a module's tests need.

Loaded by pytest only, so the contracts themselves never import pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jobhost_contracts.testing import JobRun, MemoryState
from jobhost_contracts.testing import run_job as _run_job

__all__ = ["job_state", "run_job"]


@pytest.fixture
def job_state() -> MemoryState:
    """The job's state for this test, shared by every ``run_job`` call in it."""
    return MemoryState()


@pytest.fixture
def run_job(job_state: MemoryState) -> Callable[..., JobRun]:
    """:func:`jobhost_contracts.testing.run_job`, with ``state`` defaulting to ``job_state``,
    so consecutive runs in one test see each other's state as runs of one job do."""

    def run(executor: Any, **options: Any) -> JobRun:
        options.setdefault("state", job_state)
        return _run_job(executor, **options)

    return run
