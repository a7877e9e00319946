"""``jobhost retry RUN_ID``: the next attempt at one run's work, seen to its outcome.

The retry is queued through the operator-action path (:func:`retry_run`): a pending run row
for the same occurrence and idempotency key at the next attempt, due now. A live host claims it
as it claims every retry, and this side watches the run row. With no live host, or when every
host goes away while it is still pending, the command runs that one run in its own process
(``run_here``), as ``jobhost trigger`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jobhost.catalog import Catalog
from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings
from jobhost.operations.actions import ActionRefused, RetryQueued, retry_run
from jobhost.operations.manual import RunHere, TriggerResult, finished_result
from jobhost.operations.timefmt import short_utc
from jobhost.records import PENDING, TERMINAL_OUTCOMES, RunRecord
from jobhost.store import Store

__all__ = ["RetryResult", "RunRetry", "watch_run"]

_HOST_CHECK_SECONDS = 2.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RetryResult:
    """The retry and how it ended (``result.outcome``: a run outcome, or ``queued`` /
    ``running`` when not waited for or still going at ``--timeout``)."""

    queued: RetryQueued
    result: TriggerResult

    def to_json(self) -> dict[str, Any]:
        shown = self.result.to_json()
        del shown["request_id"]
        return {"retry_of": self.queued.retry_of.id, "attempt": self.queued.attempt, **shown}


class RunRetry:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        *,
        progress: Progress,
        actor: str,
        run_here: RunHere,
        clock: Clock | None = None,
    ) -> None:
        self._catalog = catalog
        self._store = store
        self._progress = progress
        self._actor = actor
        self._clock = clock or SystemClock(settings.clock_offset)
        self._here = run_here

    def retry(self, run_id: str, reason: str, *, wait: bool, timeout: float | None) -> RetryResult:
        """Queue the retry of ``run_id`` and, unless ``wait`` is False, see it to its end.

        Raises :class:`ActionRefused` when the run cannot be retried (or run here)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = self._store.run_progress(run_id, self._clock, check_hosts=True)
        alive, old = seen.hosts_alive, seen.run
        if old is not None and not alive and wait and old.job_name not in self._catalog.jobs:
            raise ActionRefused(
                f"job {old.job_name} of run {run_id} is not declared by this installation and "
                "no host is alive to run it: start a host that declares it, or retry with "
                "--no-wait to queue it for one"
            )
        queued = retry_run(self._store, run_id, actor=self._actor, reason=reason, clock=self._clock)
        job = queued.retry_of.job_name
        self._progress(
            f"queued: attempt {queued.attempt} at the work of run {run_id} of {job} "
            f"(run {queued.run_id}) by {self._actor}: {reason}"
        )
        if not wait:
            if not alive:
                self._progress("no live host: the retry runs when a host starts")
            return RetryResult(queued, TriggerResult(None, queued.run_id, job, "queued"))
        if not alive:
            self._progress(f"no live host: running {job} in this process")
            return self._run_here(queued, deadline)
        return self._watch(queued, deadline)

    def _watch(self, queued: RetryQueued, deadline: float | None) -> RetryResult:
        # Hosts signal when a run is recorded: wait on that, re-reading now and then all the
        # same for what is not signalled and to notice that the hosts are gone.
        with self._store.change_signal() as signal:
            announced = False
            next_check = time.monotonic() + _HOST_CHECK_SECONDS
            while True:
                check_hosts = time.monotonic() >= next_check
                seen = self._store.run_progress(queued.run_id, self._clock, check_hosts=check_hosts)
                run = seen.run
                assert run is not None, f"run {queued.run_id} disappeared"
                if check_hosts:
                    next_check = time.monotonic() + _HOST_CHECK_SECONDS
                if run.outcome == PENDING and seen.hosts_alive is False:
                    self._progress("no live host any more: running it in this process")
                    return self._run_here(queued, deadline)
                if run.outcome in TERMINAL_OUTCOMES:
                    return RetryResult(queued, finished_result(None, run))
                if run.outcome != PENDING and not announced:
                    announced = True
                    self._progress(
                        f"running on host {run.host_id} (run {run.id}, started "
                        f"{short_utc(run.started_at)})"
                    )
                if deadline is not None and time.monotonic() >= deadline:
                    state = "queued" if run.outcome == PENDING else "running"
                    self._progress(f"timed out waiting: the retry is {state} and goes on")
                    shown = TriggerResult(
                        None,
                        run.id,
                        run.job_name,
                        state,
                        host=run.host_id,
                        started_at=run.started_at,
                        error="timed out waiting; the retry goes on",
                        timed_out_waiting=True,
                    )
                    return RetryResult(queued, shown)
                left = _HOST_CHECK_SECONDS if deadline is None else deadline - time.monotonic()
                signal.wait(max(0.0, min(_HOST_CHECK_SECONDS, left)))

    def _run_here(self, queued: RetryQueued, deadline: float | None) -> RetryResult:
        spec = self._catalog.jobs.get(queued.retry_of.job_name)
        if spec is None:
            raise ActionRefused(
                f"job {queued.retry_of.job_name} is not declared by this installation: the "
                f"retry (run {queued.run_id}) stays queued for a host that declares it"
            )
        ran = self._here([queued.run_id], deadline)
        run = self._store.get_run(queued.run_id)
        assert run is not None, f"run {queued.run_id} disappeared"
        if queued.run_id not in ran.taken:
            if run.outcome == PENDING:
                self._progress(
                    f"{run.job_name} is busy (a run of it still runs, or its concurrency "
                    "group is full): the retry stays queued for a host"
                )
                return RetryResult(queued, TriggerResult(None, run.id, run.job_name, "queued"))
            return self._watch(queued, deadline)  # a host that came back took it
        shown = replace(finished_result(None, run), timed_out_waiting=ran.timed_out)
        return RetryResult(queued, shown)


def watch_run(store: Store, run_id: str, timeout: float | None) -> RunRecord | None:
    """Wait for run ``run_id`` to end (woken by the hosts' signal); its row, or None when
    ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with store.change_signal() as signal:
        while True:
            run = store.get_run(run_id)
            if run is None or run.outcome in TERMINAL_OUTCOMES:
                return run
            left = _HOST_CHECK_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            signal.wait(min(_HOST_CHECK_SECONDS, left))
