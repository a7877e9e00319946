"""Calling an executor and turning whatever it does into one outcome.

``Success`` is ``succeeded``; ``Failure`` is ``failed`` (a business failure is a host failure, not
a quiet success); an exception is ``failed`` with its type and message; a run cancelled by
shutdown or a lost lease is ``cancelled``; a run past its deadline is ``timed_out``.

The executor runs in a thread other than its supervisor's, so that the supervising worker can
give up on one that ignores cancellation: after the grace period the outcome is known, the host
keeps the run's slot and lease until the stuck call ends (see ``Outcome.thread``), and the
thread (a daemon) cannot hold the process open. Executor threads are reused from call to call
(starting a thread costs more than a short run); one held by a stuck call takes no new work
until the call ends, and one idle for a minute ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jobhost_contracts import Cancellation, IJobExecutor, JobCancelled, JobContext
from returns.result import Failure, Success

__all__ = ["Outcome", "RunningCall", "execute_executor"]

_log = logging.getLogger("jobhost.envelope")

TIMEOUT_REASON = "timeout"
_SUPERVISION_STEP = 0.05
_IDLE_THREAD_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one run, before it reaches the ledger, the span and the metrics."""

    outcome: str
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    exception: BaseException | None = None
    stuck: bool = False
    thread: RunningCall | None = field(default=None, compare=False, repr=False)
    """For a stuck run, the executor's call, still running: the host keeps the run's slot
    and lease until it ends."""


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
        _log.warning(
            "job %s run %s ignored cancellation (%s) for %.1fs; "
            "its slot and lease stay taken until it ends",
            context.job_name,
            context.run_id,
            cancellation.reason,
            grace,
        )
        return Outcome(
            _cancel_outcome(cancellation),
            error_type="Stuck",
            error_message=f"executor ignored cancellation ({cancellation.reason}) for {grace:g}s",
            stuck=True,
            thread=thread,
        )
    result = box[0] if box else Outcome("failed", error_type="Lost", error_message="no result")
    if cancellation.cancelled and result.outcome in {"succeeded", "failed"}:
        # Whatever an executor returns after being cancelled describes a partial run.
        return Outcome(
            _cancel_outcome(cancellation),
            value=result.value,
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
            return Outcome("succeeded", value=inner)
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


class RunningCall:
    """One executor call on a reused thread; alive until the call returns."""

    def __init__(self) -> None:
        self._done = threading.Event()

    def is_alive(self) -> bool:
        return not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def _finish(self) -> None:
        self._done.set()


class _Threads:
    """Daemon threads that run executor calls one at a time, reused while they are idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[str, Callable[[], object], RunningCall]]] = []

    def call(self, name: str, work: Callable[[], object]) -> RunningCall:
        running = RunningCall()
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put((name, work, running))
        return running

    def _serve(
        self, inbox: queue.SimpleQueue[tuple[str, Callable[[], object], RunningCall]]
    ) -> None:
        current = threading.current_thread()
        while True:
            try:
                name, work, running = inbox.get(timeout=_IDLE_THREAD_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # handed work just now: it is in the inbox
            current.name = name
            try:
                work()
            finally:
                running._finish()
                with self._lock:
                    self._idle.append(inbox)


_THREADS = _Threads()
