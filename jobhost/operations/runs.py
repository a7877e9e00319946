"""Runs as operators act on them. A manual run or a retry is a pending run, claimed by a live
host, or with none by a one-shot host in the command's own process (``run_here``)."""

from __future__ import annotations

import string
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from jobhost.catalog import Catalog, JobSpec
from jobhost.catalog.validation import RETRYABLE_OUTCOMES as RETRYABLE
from jobhost.config import Settings
from jobhost.operations.changes import printable
from jobhost.operations.jobs import ActionRefused
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import (
    FINISHED,
    PENDING,
    RUNNING,
    TERMINAL_OUTCOMES,
    CancelWritten,
    Dropped,
    LogLine,
    RetryWritten,
    RunRecord,
    work_key,
)
from jobhost.rules import desired_schedules, may_start
from jobhost.store import Store
from jobhost.store.actions import Cancel, Request, Retry

if TYPE_CHECKING:
    from jobhost.store.claims import Before

__all__ = [
    "LAST_LINES",
    "OUTCOMES",
    "PAGE_LINES",
    "RETRYABLE",
    "RUN_ID_LIMIT",
    "AmbiguousRunId",
    "OperatorRun",
    "Ran",
    "RunHere",
    "RunLogPage",
    "TriggerResult",
    "cancel_run",
    "dropped_text",
    "entry_json",
    "history_json",
    "line_text",
    "line_time",
    "page_json",
    "read_run_log",
    "resolve_run_id",
    "retry_run",
    "watch_run",
    "watching",
]

_HOST_CHECK_SECONDS = 2.0

Progress = Callable[[str], None]
_T = TypeVar("_T")


def retry_run(
    store: Store,
    run_id: str,
    *,
    actor: str,
    reason: str,
) -> RetryWritten:
    """Queue the next attempt at run ``run_id``'s work, due now."""
    retry = Retry(run_id, lambda run, attempts: _check_retry(run_id, run, attempts))
    return store.act(retry, actor=actor, reason=reason, clock=store.clock)


def cancel_run(
    store: Store,
    run_id: str,
    *,
    actor: str,
    reason: str,
) -> CancelWritten:
    """A run not yet started is recorded cancelled at once."""
    cancel = Cancel(run_id, lambda run, now: _check_cancel(run_id, run, now))
    done = store.act(cancel, actor=actor, reason=reason, clock=store.clock)
    if done.state == "started":
        raise ActionRefused(
            f"run {done.run.id} of {done.run.job_name} started meanwhile; cancel again"
        )
    return done


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
    again = f"`jobhost trigger {run.job_name}` runs the job again"
    done = f"succeeded: there is nothing to retry ({again})"
    if run.outcome in {RUNNING, PENDING}:
        raise ActionRefused(
            f"{name} is still {run.outcome}: wait for its outcome, or stop it with "
            f"`jobhost cancel {run.id} --reason TEXT` and retry it then"
        )
    if run.outcome == "succeeded":
        raise ActionRefused(f"{name} {done}")
    if run.outcome not in RETRYABLE:
        raise ActionRefused(
            f"{name} is a {run.outcome} occurrence that never ran: `jobhost backfill "
            f"{run.job_name} --from TIME --to TIME` runs it"
        )
    for other in attempts:
        if other.id == run.id or work_key(other) != work_key(run):
            continue  # another piece of work at this occurrence (a backfill's, say)
        same = f"attempt {other.attempt} at the same work of {run.job_name} (run {other.id})"
        if other.outcome in {RUNNING, PENDING}:
            raise ActionRefused(
                f"{same} is {other.outcome}: a retry now would run it twice; wait for its outcome"
            )
        if other.outcome == "succeeded":
            raise ActionRefused(f"{same} {done}")
    return run


def _no_run(run_id: str) -> str:
    return f"no run {run_id!r}: `jobhost history NAME` lists a job's runs with their ids"


def _at(when: datetime | None) -> str:
    return f" at {when.strftime('%Y-%m-%d %H:%M:%SZ')}" if when is not None else ""


@dataclass(frozen=True)
class Ran:
    taken: frozenset[str]
    timed_out: bool
    host_id: str


RunHere = Callable[[Sequence[str], float | None], Ran]
"""Runs pending runs to their end in this process, the operator's deadline
(``time.monotonic()``) cancelling them; a second Ctrl-C raises ``KeyboardInterrupt``."""


@dataclass(frozen=True)
class TriggerResult:
    """How a manual run or a retry (of run ``retry_of``) ended, or how far it got: ``outcome``
    is a run outcome, ``refused``, or ``queued`` / ``running`` when not waited for or still going
    when ``--timeout`` ended the wait (``timed_out_waiting``)."""

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
    retry_of: str | None = None
    attempt: int | None = None

    def to_json(self) -> dict[str, Any]:
        started, finished = iso_utc(self.started_at), iso_utc(self.finished_at)
        shown = {**vars(self), "started_at": started, "finished_at": finished}
        retry = {"retry_of": shown.pop("retry_of"), "attempt": shown.pop("attempt")}
        del shown["timed_out_waiting"]
        if self.retry_of is None:
            return shown
        del shown["request_id"]
        return {**retry, **shown}


@dataclass(frozen=True)
class _Pending:
    run_id: str
    job: str
    spec: JobSpec | None
    """None: a retry of a job this installation does not declare."""
    noun: str
    """``request`` (a trigger's: its results carry the run's id as ``request_id``) or ``retry``."""

    def result(self, outcome: str, run: RunRecord | None = None, **more: Any) -> TriggerResult:
        """A result of ``outcome``; a manual run's shows its run id only once a claim took it."""
        request_id = self.run_id if self.noun == "request" else None
        claimed = run is not None and run.request_status not in {"pending", "refused"}
        run_id = self.run_id if claimed or request_id is None else None
        return TriggerResult(request_id, run_id, self.job, outcome, **more)

    def finished(self, run: RunRecord, timed_out: bool = False) -> TriggerResult:
        return self.result(
            run.outcome,
            run,
            host=run.host_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
            duration_ms=run.duration_ms,
            error=run.error_message or run.error_type,
            timed_out_waiting=timed_out,
        )


@dataclass(frozen=True)
class OperatorRun:
    """``jobhost trigger`` and ``jobhost retry``; ``progress`` receives one line per step."""

    settings: Settings
    catalog: Catalog
    store: Store
    _: KW_ONLY
    progress: Progress
    actor: str
    from_store: bool = False
    """A catalog read from the store (``trigger --no-wait``) names only rows the store has:
    there is nothing to sync, and a sync of a partial catalog would orphan the rest."""
    run_here: RunHere | None = None
    """Runs the pending run when no host is alive (none: ``--no-wait`` only)."""

    def trigger(
        self,
        spec: JobSpec,
        reason: str | None,
        *,
        wait: bool,
        timeout: float | None,
        beside_limit: bool = False,
    ) -> TriggerResult:
        """``beside_limit`` starts it even when its concurrency group is full (``--now``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        request = Request(spec.name, beside_limit, partial(may_start, spec.declaration))
        requested = self.store.act(request, actor=self.actor, reason=reason, clock=self.store.clock)
        request_id, seen = requested.id, requested.before
        assert seen is not None, "the overlap rule is given what the request found"
        if request_id is None:
            return _overlap_refused(spec, seen)
        row, hosts = seen.row, seen.hosts
        if not spec.enabled:
            self.progress(f"note: job {spec.name} is disabled; it runs only because you asked")
        if row is not None and row.paused:
            self.progress(
                f"warning: job {spec.name} is paused (by {row.paused_by} at "
                f"{short_utc(row.paused_at)}: {row.paused_reason}); running it anyway"
            )
        for group in seen.groups:
            if group.name == spec.concurrency_group and group.running >= group.limit:
                self.progress(
                    f"group {group.name} is full ({group.running} of {group.limit} busy): "
                    + (
                        "--now starts the run beside the limit"
                        if beside_limit
                        else "the run is queued until a slot frees (--now runs it beside the limit)"
                    )
                )
        if not hosts and not self.from_store:
            # Make sure the job has a schedule row, as a starting host would.
            self.store.sync_catalog(
                desired_schedules(self.catalog.jobs),
                self.store.now(),
                limits=self.settings.concurrency_limits,
                members={n: s.concurrency_group for n, s in self.catalog.jobs.items()},
            )
        why = f": {reason}" if reason else ""
        self.progress(f"queued: request {request_id} for {spec.name} by {self.actor}{why}")
        pending = _Pending(request_id, spec.name, spec, "request")
        return self._see(pending, bool(hosts), wait, deadline)

    def retry(
        self, run_id: str, reason: str, *, wait: bool, timeout: float | None
    ) -> TriggerResult:
        """:class:`ActionRefused` when the run cannot be retried (or run here)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        old = self.store.run_pages([run_id]).get(run_id)
        alive = self.store.health_rows(hosts="alive")[1].hosts
        if old is not None and not alive and wait and old.run.job_name not in self.catalog.jobs:
            raise ActionRefused(
                f"job {old.run.job_name} of run {run_id} is not declared by this installation and "
                "no host is alive to run it: start a host that declares it, or retry with "
                "--no-wait to queue it for one"
            )
        queued = retry_run(self.store, run_id, actor=self.actor, reason=reason)
        job = queued.retry_of.job_name
        self.progress(
            f"queued: attempt {queued.attempt} at the work of run {run_id} of {job} "
            f"(run {queued.run_id}) by {self.actor}: {reason}"
        )
        pending = _Pending(queued.run_id, job, self.catalog.jobs.get(job), "retry")
        result = self._see(pending, bool(alive), wait, deadline)
        return replace(result, retry_of=queued.retry_of.id, attempt=queued.attempt)

    def _see(
        self, pending: _Pending, alive: bool, wait: bool, deadline: float | None
    ) -> TriggerResult:
        if not wait:
            if not alive:
                self.progress(f"no live host: the {pending.noun} runs when a host starts")
            return pending.result("queued")
        if not alive:
            self.progress(f"no live host: running {pending.job} in this process")
            return self._run_here(pending, deadline)
        return self._watch(pending, deadline)

    def _watch(self, pending: _Pending, deadline: float | None) -> TriggerResult:
        announced: str | None = None
        for run, hosts_alive in _watching(self.store, pending.run_id, deadline):
            status = run.request_status
            if hosts_alive is False and status == "pending":
                # A retry names its job in the line before.
                subject = pending.job if pending.noun == "request" else "it"
                self.progress(f"no live host any more: running {subject} in this process")
                return self._run_here(pending, deadline)
            if status == "refused":
                return pending.result("refused", run, host=run.host_id, error=run.request_message)
            if run.outcome in TERMINAL_OUTCOMES:
                return pending.finished(run)
            if status == "queued" and announced != status:
                announced = status
                self.progress(_queued(pending, run))
            elif status == "started" and announced != run.id:
                announced = run.id
                self.progress(
                    f"running on host {run.host_id} (run {run.id}, started "
                    f"{short_utc(run.started_at)})"
                )
            if deadline is not None and time.monotonic() >= deadline:
                state = "running" if status == "started" else "queued"
                self.progress(f"timed out waiting: the {pending.noun} is {state} and goes on")
                error = f"timed out waiting; the {pending.noun} goes on"
                return pending.result(
                    state,
                    run,
                    host=run.host_id,
                    started_at=run.started_at,
                    error=error,
                    timed_out_waiting=True,
                )
        raise AssertionError("unreachable: the watch ends only by returning")

    def _run_here(self, pending: _Pending, deadline: float | None) -> TriggerResult:
        if pending.spec is None:
            raise ActionRefused(
                f"job {pending.job} is not declared by this installation: the "
                f"retry (run {pending.run_id}) stays queued for a host that declares it"
            )
        assert self.run_here is not None, "a command that waits is given run_here"
        ran = self.run_here([pending.run_id], deadline)
        run = _row(self.store, pending.run_id)
        if pending.run_id in ran.taken:
            return pending.finished(run, ran.timed_out)
        if run.request_status == "refused":
            return pending.result("refused", run, host=ran.host_id, error=run.request_message)
        if run.outcome == PENDING and (pending.noun == "retry" or run.request_status == "queued"):
            if pending.noun == "request":
                self.progress(f"{_queued(pending, run)}; it runs once a host finds a free slot")
            else:
                self.progress(
                    f"{run.job_name} is busy (a run of it still runs, or its concurrency "
                    "group is full): the retry stays queued for a host"
                )
            return pending.result("queued", run)
        # A host that came back took it meanwhile: watch it there.
        return self._watch(pending, deadline)


def _queued(pending: _Pending, run: RunRecord) -> str:
    if pending.spec is None:
        return run.request_message or ""
    return f"queued: waiting for a free slot of group {pending.spec.concurrency_group}"


def _overlap_refused(spec: JobSpec, seen: Before) -> TriggerResult:
    if seen.running:
        first = seen.running[0]
        host = first.host_id
        why = f"run {first.id} of {spec.name} is still running on host {host} since "
        why += short_utc(first.started_at)
    else:
        host = seen.row.lease_owner if seen.row else None
        why = f"host {host} holds the lease of {spec.name}"
    error = f"refused: {why} (overlap policy {spec.declaration.overlap.value})"
    return TriggerResult(None, None, spec.name, "refused", host=host, error=error)


def _watching(
    store: Store, run_id: str, deadline: float | None
) -> Iterator[tuple[RunRecord, bool | None]]:
    return watching(store, lambda: _row(store, run_id), deadline, _HOST_CHECK_SECONDS)


def _row(store: Store, run_id: str) -> RunRecord:
    page = store.run_pages([run_id]).get(run_id)
    assert page is not None, f"run {run_id} disappeared"
    return page.run


def watching(
    store: Store, read: Callable[[], _T], deadline: float | None, every: float
) -> Iterator[tuple[_T, bool | None]]:
    """``read()`` each time the hosts signal a change, and at least every ``every`` seconds
    (for what is not signalled), with whether any host is alive (None: not asked)."""
    with store.change_signal() as signal:
        next_check = time.monotonic() + _HOST_CHECK_SECONDS
        while True:
            check_hosts = time.monotonic() >= next_check
            if check_hosts:
                next_check = time.monotonic() + _HOST_CHECK_SECONDS
            yield read(), bool(store.health_rows(hosts="alive")[1].hosts) if check_hosts else None
            left = every if deadline is None else deadline - time.monotonic()
            signal.wait(max(0.0, min(every, left)))


def watch_run(store: Store, run_id: str, timeout: float | None) -> RunRecord | None:
    """The ended run's row, or None when ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for run, hosts_alive in _watching(store, run_id, deadline):
        if run.outcome in TERMINAL_OUTCOMES:
            return run
        if hosts_alive is False:  # nothing ends a gone host's run: refuse as cancel_run would
            _check_cancel(run_id, run, store.clock())
        if deadline is not None and time.monotonic() >= deadline:
            return None
    raise AssertionError("unreachable: the watch ends only by returning")


_MIN_PREFIX = 8
"""Hex characters a prefix needs: fewer would match too many runs of a large ledger."""
_SHOWN_CANDIDATES = 10
"""Runs an ambiguous prefix lists (it says when there are more)."""


class AmbiguousRunId(LookupError):
    def __init__(self, prefix: str, candidates: list[RunRecord], more: bool) -> None:
        self.candidates = candidates
        self.more = more
        count = f"more than {len(candidates)}" if more else str(len(candidates))
        super().__init__(f"run id {prefix!r} is ambiguous: it starts {count} run ids")


def resolve_run_id(store: Store, typed: str) -> str:
    """The run id ``typed`` stands for: itself when it names a run or cannot be a prefix, else
    the one run whose id starts with it (:class:`AmbiguousRunId` when it starts several)."""
    prefix = typed.strip().lower()
    if len(prefix) < _MIN_PREFIX or not set(prefix) <= set(string.hexdigits.lower()):
        return typed
    found = store.run_pages(prefix=prefix, limit=_SHOWN_CANDIDATES + 1)
    if prefix in found:
        return prefix
    if len(found) == 1:
        return next(iter(found))
    if not found:
        return typed
    matches = [page.run for page in found.values()]
    raise AmbiguousRunId(prefix, matches[:_SHOWN_CANDIDATES], len(found) > _SHOWN_CANDIDATES)


OUTCOMES = (*FINISHED, RUNNING, PENDING)
"""Every outcome a ledger row can have (``pending``: a retry waiting for its backoff)."""


def history_json(job: str, rows: list[RunRecord]) -> dict[str, Any]:
    return {"job": job, "runs": [_run_json(run) for run in rows]}


def _run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "occurrence": iso_utc(run.occurrence),
        "attempt": run.attempt,
        "source": run.source,
        "host": run.host_id,
        "requested_by": run.requested_by,
        "queued_at": iso_utc(run.queued_at),
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "duration_ms": run.duration_ms,
        "outcome": run.outcome,
        "reason": run.reason,
        "error_type": run.error_type,
        "error": run.error_message,
        "trace_id": run.trace_id,
        "units": asdict(run.units) if run.units is not None else None,
        "backfill_id": run.backfill_id,
        "cancel": None
        if run.cancel_requested_by is None
        else {
            "by": run.cancel_requested_by,
            "at": iso_utc(run.cancel_requested_at),
            "reason": run.cancel_reason,
        },
        "result": _result_value(run.result),
    }


def _result_value(text: str | None) -> Any:
    try:
        return None if text is None else orjson.loads(text)
    except orjson.JSONDecodeError:
        return text  # written by something else than the envelope: shown as the text it is


RUN_ID_LIMIT = 64

LAST_LINES = 10
"""Lines of each run ``jobhost history --logs`` shows."""

PAGE_LINES = 2000
"""Lines one read returns at most; a reader asks again with ``after`` for the rest."""


@dataclass(frozen=True, slots=True)
class RunLogPage:
    """Lines of one run after a line number, and whether the run may still write more."""

    run: RunRecord
    entries: list[LogLine | Dropped]
    next_after: int
    """The number of the last line returned (``after`` again when there was none)."""

    @property
    def running(self) -> bool:
        return self.run.outcome in (RUNNING, PENDING)


def read_run_log(
    store: Store, run_id: str, *, after: int = 0, limit: int = PAGE_LINES
) -> RunLogPage | None:
    """None for a run the ledger does not know. The run is read before its lines (written
    before its outcome): once seen finished, all are read."""
    found = store.run_pages([run_id], after=after, lines=limit).get(run_id)
    if found is None:
        return None
    last = next((e.seq for e in reversed(found.lines) if isinstance(e, LogLine)), after)
    return RunLogPage(found.run, found.lines, last)


def dropped_text(gap: Dropped) -> str:
    """``… 198,000 lines (19.4 MB) dropped …``"""
    noun = "line" if gap.lines == 1 else "lines"
    return f"… {gap.lines:,} {noun} ({_size(gap.bytes)}) dropped …"


def line_text(entry: LogLine | Dropped) -> str:
    """One entry as ``jobhost logs`` prints it (continuation lines as they are)."""
    if isinstance(entry, Dropped):
        return dropped_text(entry)
    return f"{line_time(entry.at)} {entry.level:<8} {printable(entry.message)}"


def entry_json(entry: LogLine | Dropped) -> dict[str, Any]:
    if isinstance(entry, Dropped):
        return {"dropped": {"lines": entry.lines, "bytes": entry.bytes}}
    return {
        "seq": entry.seq,
        "time": line_time(entry.at),
        "level": entry.level,
        "message": entry.message,
    }


def page_json(page: RunLogPage) -> dict[str, Any]:
    return {
        "run_id": page.run.id,
        "job": page.run.job_name,
        "outcome": page.run.outcome,
        "running": page.running,
        "lines": [entry_json(entry) for entry in page.entries],
        "next_after": page.next_after,
    }


def line_time(at: datetime) -> str:
    """``2026-05-04T10:00:00.123Z``: lines of one second stay apart."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
