"""Calling an executor and turning whatever it does into one outcome.

``Success`` is ``succeeded``; ``Failure`` is ``failed`` (a business failure is a host failure, not
a quiet success); an exception is ``failed`` with its type and message; a run cancelled by
shutdown or a lost lease is ``cancelled``; a run past its deadline is ``timed_out``.

Two ways to call, one outcome:

- :func:`execute_here`, a host's worker: the executor runs on the worker's own thread, watched by
  the supervisor (:mod:`jobhost.envelope.supervision`), which cancels it at its deadline and
  declares it stuck once it has ignored its cancellation for the grace period. A stuck call
  keeps its worker, and so its slot and lease, until it ends; its outcome is the stuck verdict.
- :func:`execute_executor`, a run in a command: the executor runs on a thread of its own and the
  caller waits, so that the command can give up on a call that ignores cancellation: after the
  grace period the outcome is known and the command ends (the thread is a daemon, see
  :mod:`jobhost.envelope.threads`), while ``Outcome.thread`` is the call, still running.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from jobhost_contracts import Cancellation, IJobExecutor, JobCancelled, JobContext
from returns.result import Failure, Success

from jobhost.envelope import supervision
from jobhost.envelope.results import result_json
from jobhost.envelope.supervision import TIMEOUT_REASON, SupervisedCancellation
from jobhost.envelope.threads import DaemonThreads, RunningCall

__all__ = ["Outcome", "execute_executor", "execute_here"]

_log = logging.getLogger("jobhost.envelope")

_SUPERVISION_STEP = 0.05


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one run, before it reaches the ledger, the span and the metrics."""

    outcome: str
    value: Any = None
    result: str | None = None
    """``value`` as the ledger keeps it (:func:`~jobhost.envelope.results.result_json`)."""
    error_type: str | None = None
    error_message: str | None = None
    exception: BaseException | None = None
    stuck: bool = False
    thread: RunningCall | None = field(default=None, compare=False, repr=False)
    """For a stuck run in a command, the executor's call, still running."""


def execute_here(
    executor: IJobExecutor,
    context: JobContext,
    *,
    timeout: float | None,
    grace: float,
    on_stuck: Callable[[Outcome], None],
) -> Outcome:
    """Run ``executor.execute(context)`` on this thread to an outcome: cancelled after
    ``timeout`` seconds, and declared stuck (``on_stuck(verdict)``, from the supervisor's
    thread) should it run on ``grace`` seconds after its cancellation; a stuck call's outcome,
    once it ends, is that verdict. ``context.cancellation`` must be a
    :class:`~jobhost.envelope.supervision.SupervisedCancellation`."""
    cancellation = context.cancellation
    if not isinstance(cancellation, SupervisedCancellation):
        raise TypeError("execute_here needs the run's cancellation to be a SupervisedCancellation")
    box: list[Outcome] = []
    watched = supervision.watch(
        cancellation,
        timeout=timeout,
        grace=grace,
        on_stuck=lambda: on_stuck(_warned(_stuck_verdict(context, grace), context)),
    )
    try:
        # In a copy of the caller's context: the executor's spans nest under the run's span,
        # and whatever it sets stays out of the worker's context for the runs after it.
        contextvars.copy_context().run(_call, executor, context, box.append)
    finally:
        stuck = supervision.release(watched)
    if stuck:
        return _stuck_verdict(context, grace)
    return _settled(box, cancellation)


def execute_executor(
    executor: IJobExecutor,
    context: JobContext,
    *,
    timeout: float | None,
    grace: float,
) -> Outcome:
    """Run ``executor.execute(context)`` to an outcome within ``timeout`` (+ ``grace``)."""
    box: list[Outcome] = []
    # Copy the caller's context so the executor's spans nest under the run's span.
    runner = contextvars.copy_context()
    thread = _THREADS.call(
        f"job:{context.job_name}",
        lambda: runner.run(_call, executor, context, box.append),
    )
    cancellation = context.cancellation
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        if cancellation.cancelled:
            thread.join(grace)
            break
        # join returns the moment the executor finishes; the slice bounds how late a
        # cancellation or a deadline is noticed.
        step = _SUPERVISION_STEP
        if deadline is not None:
            step = min(step, deadline - time.monotonic())
            if step <= 0:
                cancellation.cancel(TIMEOUT_REASON)
                continue
        thread.join(step)
    if thread.is_alive():
        return replace(_warned(_stuck_verdict(context, grace), context), thread=thread)
    return _settled(box, cancellation)


def _stuck_verdict(context: JobContext, grace: float) -> Outcome:
    """The outcome of a call that ignored its cancellation for ``grace`` seconds."""
    cancellation = context.cancellation
    return Outcome(
        _cancel_outcome(cancellation),
        error_type="Stuck",
        error_message=f"executor ignored cancellation ({cancellation.reason}) for {grace:g}s",
        stuck=True,
    )


def _warned(verdict: Outcome, context: JobContext) -> Outcome:
    _log.warning(
        "job %s run %s: %s; its slot and lease stay taken until it ends",
        context.job_name,
        context.run_id,
        verdict.error_message,
    )
    return verdict


def _settled(box: list[Outcome], cancellation: Cancellation) -> Outcome:
    """The outcome of a call that ended: what it delivered, read in the light of a
    cancellation."""
    result = box[0] if box else Outcome("failed", error_type="Lost", error_message="no result")
    if cancellation.cancelled and result.outcome in {"succeeded", "failed"}:
        # Whatever an executor returns after being cancelled describes a partial run.
        return Outcome(
            _cancel_outcome(cancellation),
            value=result.value,
            result=result.result,
            error_type=result.error_type,
            error_message=result.error_message or f"cancelled: {cancellation.reason}",
            exception=result.exception,
        )
    return result


def _call(executor: IJobExecutor, context: JobContext, deliver: Callable[[Outcome], None]) -> None:
    try:
        value: Any = executor.execute(context)
        if inspect.isawaitable(value):
            value = asyncio.run(_drive(value, context.cancellation))
        deliver(_from_result(value, context.cancellation))
    except (JobCancelled, asyncio.CancelledError) as error:
        deliver(
            Outcome(
                _cancel_outcome(context.cancellation),
                error_type=type(error).__name__,
                error_message=str(error) or "cancelled",
                exception=error,
            )
        )
    except Exception as error:
        _log.error(
            "job %s run %s raised %s: %s",
            context.job_name,
            context.run_id,
            type(error).__name__,
            error,
            exc_info=error,
        )
        deliver(
            Outcome(
                "failed", error_type=type(error).__name__, error_message=str(error), exception=error
            )
        )
    except BaseException as error:  # in a job's thread: recorded, never re-raised
        # SystemExit or KeyboardInterrupt would end only this thread, and the run would be
        # recorded "Lost: no result"; the executor asked to end the process, not its call.
        if isinstance(error, SystemExit | KeyboardInterrupt):
            what = "tried to end the process"
        else:
            what = "raised a BaseException that is not an Exception"
        message = f"{error!r}: the executor {what}; return a Failure or raise an Exception instead"
        _log.error("job %s run %s: %s", context.job_name, context.run_id, message)
        deliver(Outcome("failed", error_type=type(error).__name__, error_message=message))


async def _drive(awaitable: Awaitable[Any], cancellation: Cancellation) -> Any:
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(cancellation.wait_async())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        waiter.cancel()
        return task.result()
    task.cancel()
    return await task


def _from_result(value: Any, cancellation: Cancellation) -> Outcome:
    match value:
        case Success(inner):
            # Made here, on the executor's thread, once: the ledger and the audit share it.
            return Outcome("succeeded", value=inner, result=result_json(inner))
        case Failure(error):
            if isinstance(error, BaseException):
                return Outcome(
                    "failed",
                    error_type=type(error).__name__,
                    error_message=str(error),
                    exception=error,
                )
            return Outcome("failed", error_type="Failure", error_message=str(error))
    return Outcome(
        "failed",
        error_type="TypeError",
        error_message=f"executor returned {type(value).__name__}, not a returns Result",
    )


def _cancel_outcome(cancellation: Cancellation) -> str:
    return "timed_out" if cancellation.reason == TIMEOUT_REASON else "cancelled"


_THREADS = DaemonThreads()
