"""A host's worker calls the executor on its own thread; one supervisor thread cancels a call at
its deadline and declares stuck a call that ignores its cancellation for the grace period."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from jobhost_contracts import Cancellation, JobContext, TriggerSource
from returns.result import Success

from jobhost.envelope.envelope import SupervisedCancellation, execute_here
from jobhost.envelope.lifecycle import Outcome

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


class _Executor:
    def __init__(self, body: Callable[[JobContext], Any]) -> None:
        self.body = body

    def execute(self, context: JobContext) -> Any:
        return self.body(context)


def _context(cancellation: Any = None) -> JobContext:
    return JobContext(
        job_name="sample.supervised",
        run_id="run-1",
        occurrence=None,
        attempt=1,
        source=TriggerSource.MANUAL,
        idempotency_key="key",
        fencing_token=1,
        config={},
        logger=logging.getLogger("jobhost.job.sample.supervised"),
        cancellation=SupervisedCancellation() if cancellation is None else cancellation,
        state=None,  # type: ignore[arg-type]  # no executor here reads state
    )


class _Declared:
    """What ``on_stuck`` heard, and on which thread."""

    def __init__(self) -> None:
        self.verdicts: list[Outcome] = []
        self.threads: list[int] = []
        self.event = threading.Event()

    def __call__(self, verdict: Outcome) -> None:
        self.verdicts.append(verdict)
        self.threads.append(threading.get_ident())
        self.event.set()


def test_the_executor_runs_on_the_callers_thread_and_leaves_its_context_alone() -> None:
    seen: list[int] = []

    def body(context: JobContext) -> Any:
        seen.append(threading.get_ident())
        _SEEN.set("set by the executor")
        return Success("done")

    declared = _Declared()
    outcome = execute_here(_Executor(body), _context(), timeout=5.0, grace=1.0, on_stuck=declared)

    assert (outcome.outcome, outcome.value) == ("succeeded", "done")
    assert seen == [threading.get_ident()]
    assert _SEEN.get() == "unset"  # the next run on this worker starts clean
    assert declared.verdicts == []


def test_a_call_past_its_deadline_is_cancelled_and_timed_out() -> None:
    def body(context: JobContext) -> Any:
        context.cancellation.wait(10)
        return Success("stopped when asked")

    began = time.monotonic()
    outcome = execute_here(
        _Executor(body), _context(), timeout=0.2, grace=5.0, on_stuck=_Declared()
    )

    assert outcome.outcome == "timed_out" and not outcome.stuck
    assert 0.15 < time.monotonic() - began < 5


def test_a_call_that_ignores_its_timeout_is_declared_stuck_while_it_runs_and_keeps_its_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    declared = _Declared()

    def body(context: JobContext) -> Any:
        # Deaf to its cancellation: returns only once it has been declared stuck.
        declared.event.wait(10)
        return Success("came back")

    with caplog.at_level(logging.WARNING, logger="jobhost.envelope"):
        outcome = execute_here(
            _Executor(body), _context(), timeout=0.1, grace=0.2, on_stuck=declared
        )

    (verdict,) = declared.verdicts
    assert declared.threads != [threading.get_ident()]  # from the supervisor, while it ran
    assert (verdict.outcome, verdict.error_type, verdict.stuck) == ("timed_out", "Stuck", True)
    assert "ignored cancellation (timeout) for 0.2s" in (verdict.error_message or "")
    # Once the code ends, its outcome is the verdict, not what it returned so late.
    assert outcome == verdict
    assert "ignored cancellation" in caplog.text


def test_the_grace_is_timed_from_a_cancellation_by_the_host() -> None:
    cancellation = SupervisedCancellation()
    declared = _Declared()

    def body(context: JobContext) -> Any:
        time.sleep(0.2)
        context.cancellation.cancel("shutdown")  # as the host would, from anywhere
        declared.event.wait(10)
        return Success("late")

    began = time.monotonic()
    outcome = execute_here(
        _Executor(body), _context(cancellation), timeout=None, grace=0.3, on_stuck=declared
    )

    assert (outcome.outcome, outcome.error_type) == ("cancelled", "Stuck")
    assert "(shutdown) for 0.3s" in (outcome.error_message or "")
    assert time.monotonic() - began >= 0.5


def test_a_call_that_ends_within_its_grace_is_not_stuck() -> None:
    declared = _Declared()

    def body(context: JobContext) -> Any:
        context.cancellation.wait(10)
        time.sleep(0.1)  # winding down, within the grace
        return Success("partial")

    outcome = execute_here(_Executor(body), _context(), timeout=0.1, grace=2.0, on_stuck=declared)

    assert (outcome.outcome, outcome.stuck) == ("timed_out", False)
    assert declared.verdicts == []


def test_calls_that_end_before_their_deadline_are_never_cancelled_later() -> None:
    cancellations = [SupervisedCancellation() for _ in range(200)]
    for cancellation in cancellations:
        execute_here(
            _Executor(lambda context: Success("quick")),
            _context(cancellation),
            timeout=0.05,
            grace=1.0,
            on_stuck=_Declared(),
        )
    time.sleep(0.2)  # past every deadline: the supervisor has looked

    assert not any(c.cancelled for c in cancellations)


def test_a_plain_cancellation_is_refused() -> None:
    with pytest.raises(TypeError, match="SupervisedCancellation"):
        execute_here(
            _Executor(lambda context: Success("x")),
            _context(Cancellation()),
            timeout=None,
            grace=1.0,
            on_stuck=_Declared(),
        )
