"""Operator actions on one run: retry its work, or cancel it through its host.

Part of the one operator-action path (:mod:`jobhost.operations.actions` exports these with the
others): each changes the store and writes its change-log entry (``job_changes``) in one
transaction the store opens (``jobhost.store.run_actions``), with the actor the surface vouches
for and the reason. What may be done, and the refusal that names the fix, is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jobhost.clock import Clock, SystemClock
from jobhost.records import PENDING, RUNNING, RunRecord, work_key
from jobhost.store import Store

__all__ = ["RETRYABLE", "ActionRefused", "CancelAsked", "RetryQueued", "cancel_run", "retry_run"]

RETRYABLE = frozenset({"failed", "timed_out", "abandoned", "cancelled"})
"""Outcomes an operator may retry: the attempt did not do its work."""


class ActionRefused(Exception):
    """An operator action that cannot be done; the message names the run and the fix.
    ``unknown`` is True when the run does not exist (the API answers 404, not 409)."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


@dataclass(frozen=True)
class RetryQueued:
    """The next attempt at a run's work, queued: ``run_id`` is the new run."""

    run_id: str
    attempt: int
    retry_of: RunRecord
    at: datetime


def retry_run(
    store: Store,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> RetryQueued:
    """Queue the next attempt at run ``run_id``'s occurrence (its idempotency key too), due now:
    a host claims it as it claims every retry. Refused for a run still running, one whose work
    succeeded, and one never attempted."""
    done = store.retry_logged(
        run_id,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        check=lambda run, attempts: _check_retry(run_id, run, attempts),
    )
    return RetryQueued(done.run_id, done.attempt, done.retry_of, done.at)


@dataclass(frozen=True)
class CancelAsked:
    """A cancel asked for: ``run`` as it was; ``state`` is ``requested`` (its host cancels it
    on its next turn), ``already`` (someone asked first: see ``run.cancel_requested_by``) or
    ``cancelled`` (it had not started: it is recorded cancelled at once)."""

    run: RunRecord
    state: str
    at: datetime


def cancel_run(
    store: Store,
    run_id: str,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> CancelAsked:
    """Ask the host running ``run_id`` to cancel it (cooperatively: the executor's
    cancellation is set, and the run is recorded ``cancelled``). A run not yet started is
    recorded cancelled at once. Refused for a finished run and for one whose host is gone."""
    done = store.cancel_logged(
        run_id,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        check=lambda run, now: _check_cancel(run_id, run, now),
    )
    if done.state == "started":
        raise ActionRefused(
            f"run {done.run.id} of {done.run.job_name} started meanwhile; cancel again"
        )
    return CancelAsked(done.run, done.state, done.at)


def _check_cancel(run_id: str, run: RunRecord | None, now: datetime) -> RunRecord:
    if run is None:
        raise ActionRefused(_no_run(run_id), unknown=True)
    if run.outcome not in {PENDING, RUNNING}:
        raise ActionRefused(
            f"run {run.id} of {run.job_name} already ended {run.outcome}"
            f"{_at(run.finished_at)}: there is nothing to cancel"
        )
    if run.outcome == RUNNING and (run.lease_expires_at is None or run.lease_expires_at < now):
        raise ActionRefused(
            f"run {run.id} of {run.job_name} belongs to host {run.host_id}, which is not "
            f"alive (its lease expired{_at(run.lease_expires_at)}): no process runs it to "
            "cancel. A live host records it abandoned when it sees the expired lease: "
            f"start one (`jobhost run`) if none runs, then `jobhost retry {run.id} --reason "
            "TEXT` if its work should run again"
        )
    return run


def _check_retry(run_id: str, run: RunRecord | None, attempts: Sequence[RunRecord]) -> RunRecord:
    if run is None:
        raise ActionRefused(_no_run(run_id), unknown=True)
    name = f"run {run.id} of {run.job_name}"
    if run.outcome in {RUNNING, PENDING}:
        raise ActionRefused(
            f"{name} is still {run.outcome}: wait for its outcome, or stop it with "
            f"`jobhost cancel {run.id} --reason TEXT` and retry it then"
        )
    if run.outcome == "succeeded":
        raise ActionRefused(
            f"{name} succeeded: there is nothing to retry (`jobhost trigger {run.job_name}` "
            "runs the job again)"
        )
    if run.outcome not in RETRYABLE:
        raise ActionRefused(
            f"{name} is a {run.outcome} occurrence that never ran: `jobhost backfill "
            f"{run.job_name} --from TIME --to TIME` runs it"
        )
    for other in attempts:
        if other.id == run.id or work_key(other) != work_key(run):
            continue  # another piece of work at this occurrence (a backfill's, say)
        if other.outcome in {RUNNING, PENDING}:
            raise ActionRefused(
                f"attempt {other.attempt} at the same work of {run.job_name} (run {other.id}) "
                f"is {other.outcome}: a retry now would run it twice; wait for its outcome"
            )
        if other.outcome == "succeeded":
            raise ActionRefused(
                f"attempt {other.attempt} at the same work of {run.job_name} (run {other.id}) "
                f"succeeded: there is nothing to retry (`jobhost trigger {run.job_name}` runs "
                "the job again)"
            )
    return run


def _no_run(run_id: str) -> str:
    return f"no run {run_id!r}: `jobhost history NAME` lists a job's runs with their ids"


def _at(when: datetime | None) -> str:
    return f" at {when.strftime('%Y-%m-%d %H:%M:%SZ')}" if when is not None else ""
