"""The executor protocol: the business entry point of a job, an object or a plain function."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from returns.result import Result

from jobhost_contracts.context import JobContext

__all__ = ["IJobExecutor", "JobFunction", "JobResult", "as_executor"]

JobResult = Result[Any, Any]
"""``Success(value)`` for a run that did its work; ``Failure(error)`` for an expected business
failure (the host records the run failed and applies the retry policy). Bugs raise."""


@runtime_checkable
class IJobExecutor(Protocol):
    """Runs one job. ``execute`` may be a plain or an ``async`` method.

    Long work checks ``context.cancellation`` between units, so shutdown and timeouts converge.
    """

    def execute(self, context: JobContext) -> JobResult | Awaitable[JobResult]: ...


JobFunction = Callable[[JobContext], "JobResult | Awaitable[JobResult]"]
"""A function (plain or ``async``) that runs a job: it may stand where an executor does."""


@dataclass(frozen=True, eq=False, repr=False)
class _FunctionExecutor:
    function: JobFunction

    def execute(self, context: JobContext) -> JobResult | Awaitable[JobResult]:
        return self.function(context)

    def __repr__(self) -> str:
        return f"<executor of function {getattr(self.function, '__qualname__', self.function)}>"


def as_executor(executor: IJobExecutor | JobFunction) -> IJobExecutor:
    """``executor`` as an object with ``execute(context)``: a callable without ``execute``
    wrapped. A class is returned as it is, for the host's validation to ask for an instance."""
    if isinstance(executor, type) or callable(getattr(executor, "execute", None)):
        return executor  # type: ignore[return-value]
    if callable(executor):
        return _FunctionExecutor(executor)
    return executor
