"""A manual run: queued as a pending run, claimed like any run, executed in the same envelope.

With a live host, the run is left to it (it wakes at once) and this side watches the run's row
until the outcome. With no live host, or when every host goes away while the request is still
queued, the command runs it in its own process (``run_here``: a host in one-shot mode, limited
to this run): the same claim, envelope, lease renewal and cancel following as on any host.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from jobhost.catalog import Catalog, JobSpec
from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings
from jobhost.operations.actions import request_trigger
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import TERMINAL_OUTCOMES, RunRecord
from jobhost.rules.desired import desired_schedules
from jobhost.rules.policy import may_start
from jobhost.store import Store
from jobhost.store.signals import ChangeSignal

__all__ = ["ManualRun", "Ran", "RunHere", "TriggerResult", "finished_result"]

_HOST_CHECK_SECONDS = 2.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Ran:
    """What running pending runs in this process did: the runs it claimed (those it did not
    were refused, busy, or taken by a host first), whether the deadline cancelled them, and the
    id its one-shot host claimed as."""

    taken: frozenset[str]
    timed_out: bool
    host_id: str


class RunHere(Protocol):
    """Runs the pending runs ``run_ids`` to their end in this process, the operator's deadline
    (``time.monotonic()``) cancelling them; a second Ctrl-C raises ``KeyboardInterrupt``."""

    def __call__(self, run_ids: Sequence[str], deadline: float | None, /) -> Ran: ...


@dataclass(frozen=True)
class TriggerResult:
    """How a manual run ended, or how far it got.

    ``outcome`` is a run outcome (``succeeded``, ``failed``, ``timed_out``, ``cancelled``,
    ``abandoned``), ``refused`` (the overlap policy or the host said no), ``queued`` (with
    ``--no-wait``, or still waiting at the timeout) or ``running`` (still running at the
    timeout). ``timed_out_waiting`` is True when ``--timeout`` ended the wait.
    """

    request_id: str | None
    run_id: str | None
    job: str
    outcome: str
    host: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    error: str | None = None
    timed_out_waiting: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "run_id": self.run_id,
            "job": self.job,
            "outcome": self.outcome,
            "host": self.host,
            "started_at": iso_utc(self.started_at),
            "finished_at": iso_utc(self.finished_at),
            "duration_ms": self.duration_ms,
            "error": self.error,
        }


class ManualRun:
    """``jobhost trigger`` for one job of ``catalog``; ``progress`` receives one line per step."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        *,
        progress: Progress,
        warn: Progress,
        clock: Clock | None = None,
        from_store: bool = False,
        run_here: RunHere | None = None,
    ) -> None:
        """``run_here`` runs the request when no host is alive (none: ``--no-wait`` only)."""
        # A catalog read from the store (``trigger --no-wait``) names only rows the store has:
        # there is nothing to sync, and a sync of a partial catalog would orphan the rest.
        self._from_store = from_store
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._progress = progress
        self._warn = warn
        self._clock = clock or SystemClock(settings.clock_offset)
        self._here = run_here

    def trigger(
        self,
        spec: JobSpec,
        reason: str | None,
        *,
        wait: bool,
        timeout: float | None,
        beside_limit: bool = False,
    ) -> TriggerResult:
        """Queue a manual run of ``spec`` and, unless ``wait`` is False, see it to its end.

        ``beside_limit`` starts it even when its concurrency group is full (``--now``).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = self._store.before_trigger(
            spec.name, self._clock, with_groups=bool(spec.concurrency_group)
        )
        row, running, hosts, groups = seen.row, seen.running, seen.hosts, seen.groups
        lease_live = row.lease_live(seen.now) if row is not None else False
        if not may_start(spec.declaration, len(running), lease_live):
            return self._refused_overlap(spec, running, row.lease_owner if row else None)
        if not spec.enabled:
            self._warn(f"note: job {spec.name} is disabled; it runs only because you asked")
        if row is not None and row.paused:
            self._warn(
                f"warning: job {spec.name} is paused (by {row.paused_by} at "
                f"{short_utc(row.paused_at)}: {row.paused_reason}); running it anyway"
            )
        for group in groups:
            if group.name == spec.concurrency_group and group.running >= group.limit:
                self._progress(
                    f"group {group.name} is full ({group.running} of {group.limit} busy): "
                    + (
                        "--now starts the run beside the limit"
                        if beside_limit
                        else "the run is queued until a slot frees (--now runs it beside the limit)"
                    )
                )
        if not hosts and not self._from_store:
            self._sync()
        user = getpass.getuser()
        request_id = request_trigger(
            self._store,
            spec.name,
            actor=user,
            reason=reason,
            clock=self._clock,
            beside_limit=beside_limit,
        )
        why = f": {reason}" if reason else ""
        self._progress(f"queued: request {request_id} for {spec.name} by {user}{why}")
        if not wait:
            if not hosts:
                self._progress("no live host: the request runs when a host starts")
            return TriggerResult(request_id, None, spec.name, "queued")
        if not hosts:
            self._progress(f"no live host: running {spec.name} in this process")
            return self._run_here(request_id, spec, deadline)
        return self._watch(request_id, spec, deadline)

    # -- waiting for a host ------------------------------------------------------------------

    def _watch(self, request_id: str, spec: JobSpec, deadline: float | None) -> TriggerResult:
        # Hosts signal when they claim or refuse a request and when its run is recorded: wait
        # on that. The bounded wait re-reads now and then all the same, for what is not
        # signalled (a dead host's run recorded abandoned) and to notice the hosts are gone.
        with self._store.change_signal() as signal:
            return self._watch_signalled(request_id, spec, deadline, signal)

    def _watch_signalled(
        self, request_id: str, spec: JobSpec, deadline: float | None, signal: ChangeSignal
    ) -> TriggerResult:
        announced: str | None = None
        next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
        while True:
            check_hosts = time.monotonic() >= next_host_check
            if check_hosts:
                next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
            seen = self._store.run_progress(request_id, self._clock, check_hosts=check_hosts)
            run = seen.run
            assert run is not None, f"run {request_id} disappeared"
            status = run.request_status
            if seen.hosts_alive is False and status == "pending":
                self._progress(f"no live host any more: running {spec.name} in this process")
                return self._run_here(request_id, spec, deadline)
            if status == "refused":
                return self._refused(request_id, spec, run.request_message, run.host_id)
            if run.outcome in TERMINAL_OUTCOMES:
                return finished_result(request_id, run)
            if status == "queued" and announced != status:
                announced = status
                self._progress(_queued(spec))
            elif status == "started" and announced != run.id:
                announced = run.id
                self._progress(
                    f"running on host {run.host_id} (run {run.id}, started "
                    f"{short_utc(run.started_at)})"
                )
            if deadline is not None and time.monotonic() >= deadline:
                state = "running" if status == "started" else "queued"
                self._progress(f"timed out waiting: the request is {state} and goes on")
                return TriggerResult(
                    request_id,
                    run.id if status != "pending" else None,
                    spec.name,
                    state,
                    host=run.host_id,
                    started_at=run.started_at,
                    error="timed out waiting; the request goes on",
                    timed_out_waiting=True,
                )
            left = _HOST_CHECK_SECONDS if deadline is None else deadline - time.monotonic()
            signal.wait(max(0.0, min(_HOST_CHECK_SECONDS, left)))

    # -- running here ------------------------------------------------------------------------

    def _run_here(self, request_id: str, spec: JobSpec, deadline: float | None) -> TriggerResult:
        assert self._here is not None, "a trigger that waits is given run_here"
        ran = self._here([request_id], deadline)
        run = self._store.get_run(request_id)
        assert run is not None, f"run {request_id} disappeared"
        if request_id not in ran.taken:
            if run.request_status == "refused":
                return self._refused(request_id, spec, run.request_message, ran.host_id)
            if run.request_status == "queued":
                self._progress(f"{_queued(spec)}; it runs once a host finds a free slot")
                return TriggerResult(request_id, run.id, spec.name, "queued")
            # A host that came back took it meanwhile: watch it there.
            return self._watch(request_id, spec, deadline)
        return replace(finished_result(request_id, run), timed_out_waiting=ran.timed_out)

    # -- results -----------------------------------------------------------------------------

    def _sync(self) -> None:
        """Make sure the job has a schedule row, as a starting host would."""
        self._store.sync_catalog(
            desired_schedules(self._catalog.jobs),
            self._store.now(),
            limits=self._settings.concurrency_limits,
            members={n: s.concurrency_group for n, s in self._catalog.jobs.items()},
        )

    def _refused(
        self, request_id: str | None, spec: JobSpec, message: str | None, host: str | None
    ) -> TriggerResult:
        text = message or "refused"
        return TriggerResult(request_id, None, spec.name, "refused", host=host, error=text)

    def _refused_overlap(
        self, spec: JobSpec, running: list[RunRecord], lease_owner: str | None
    ) -> TriggerResult:
        if running:
            first = running[0]
            message = (
                f"refused: run {first.id} of {spec.name} is still running on host "
                f"{first.host_id} since {short_utc(first.started_at)} (overlap policy "
                f"{spec.declaration.overlap.value})"
            )
            return self._refused(None, spec, message, first.host_id)
        message = (
            f"refused: host {lease_owner} holds the lease of {spec.name} (overlap policy "
            f"{spec.declaration.overlap.value})"
        )
        return self._refused(None, spec, message, lease_owner)


def _queued(spec: JobSpec) -> str:
    return f"queued: waiting for a free slot of group {spec.concurrency_group}"


def finished_result(request_id: str | None, run: RunRecord) -> TriggerResult:
    """The result of a run that ended (of ``request_id``, for a trigger's). No progress line:
    the caller prints the outcome once (trigger_line or the JSON)."""
    return TriggerResult(
        request_id,
        run.id,
        run.job_name,
        run.outcome,
        host=run.host_id,
        started_at=run.started_at,
        finished_at=run.finished_at,
        duration_ms=run.duration_ms,
        error=run.error_message or run.error_type,
    )
