"""The executor protocol: the business entry point of a job."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

from returns.result import Result

from jobhost_contracts.context import JobContext

__all__ = ["IJobExecutor", "JobResult"]

JobResult = Result[Any, Any]
"""``Success(value)`` for a run that did its work; ``Failure(error)`` for an expected business
failure (the host records the run failed and applies the retry policy). Bugs raise."""


@runtime_checkable
class IJobExecutor(Protocol):
    """Runs one job. ``execute`` may be a plain or an ``async`` method.

    Long work checks ``context.cancellation`` between units, so shutdown and timeouts converge.
    """

    def execute(self, context: JobContext) -> JobResult | Awaitable[JobResult]: ...
