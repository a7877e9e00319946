"""Operator actions on failures: acknowledge one, or retry every open one a filter matches.

Both go through the one operator-action path: an acknowledgement is a change-log entry
(``jobhost.store.failure_actions``); a bulk retry is one :func:`retry_run` per failure, each
queued as a pending run for the hosts with its own change-log entry, exactly as ``jobhost
retry RUN_ID`` queues one. Several failed attempts at one piece of work are retried once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from jobhost.clock import Clock, SystemClock
from jobhost.operations.failures import (
    FailureQuery,
    decode_cursor,
    open_failed_runs,
    read_failures,
)
from jobhost.operations.run_actions import ActionRefused, RetryQueued, retry_run
from jobhost.operations.timefmt import short_utc
from jobhost.records import FAILED, Resolution, RunRecord, work_key
from jobhost.store import Store

__all__ = [
    "BULK_LIMIT",
    "Acknowledgement",
    "BulkRetry",
    "acknowledge_failure",
    "jobs_of_module",
    "open_failure_lines",
    "open_failures",
    "retry_failures",
]

BULK_LIMIT = 1000
"""The most failures one bulk retry queues; more are left for the next."""

_PAGE = 200
# Pages read at most: where resolved failures far outnumber open ones, a bulk retry stops
# after this many (each looks at a bounded number of failures) rather than read the ledger.
_PAGES = 20


@dataclass(frozen=True)
class Acknowledgement:
    run: RunRecord
    at: datetime


def acknowledge_failure(
    store: Store, run_id: str, *, actor: str, reason: str, clock: Clock | None = None
) -> Acknowledgement:
    """Resolve failed run ``run_id`` without a rerun. Refused for an unknown run, one that did
    not fail, and one already resolved (naming how)."""
    done = store.ack_logged(
        run_id,
        actor=actor,
        reason=reason,
        clock=clock or SystemClock(),
        check=lambda run, resolved: _check_ack(run_id, run, resolved),
    )
    return Acknowledgement(done.run, done.at)


@dataclass(frozen=True)
class BulkRetry:
    queued: list[RetryQueued]
    refused: list[tuple[RunRecord, str]]
    """Failures matched but not retried, with why (a retry already under way, say)."""
    more: bool
    """More than :data:`BULK_LIMIT` open failures matched: the rest were left."""
    hosts_alive: int
    """Live hosts when the retries were queued (0: they wait for one)."""


def retry_failures(
    store: Store,
    query: FailureQuery,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> BulkRetry:
    """Queue one retry of every open failure ``query`` matches (the newest failed attempt of
    each piece of work), each logged; at most :data:`BULK_LIMIT`."""
    runs, more = open_failures(store, query, clock)
    queued: list[RetryQueued] = []
    refused: list[tuple[RunRecord, str]] = []
    for run in runs:
        try:
            queued.append(retry_run(store, run.id, actor=actor, reason=reason, clock=clock))
        except ActionRefused as error:
            refused.append((run, str(error)))
    _now, alive = store.live_hosts()
    return BulkRetry(queued, refused, more, len(alive))


def open_failures(
    store: Store, query: FailureQuery, clock: Clock | None = None
) -> tuple[list[RunRecord], bool]:
    """The open finished failures ``query`` matches, one per piece of work (its newest failed
    attempt), newest first, at most :data:`BULK_LIMIT`; and whether more matched (or may
    have: the search stopped)."""
    found: list[RunRecord] = []
    seen: set[tuple[str, str]] = set()
    page = replace(query, limit=_PAGE, include_resolved=False, cursor=None)
    for _ in range(_PAGES):
        listed = read_failures(store, page, clock)
        for row in listed.failures:
            key = (row.run.job_name, work_key(row.run))
            if row.outcome not in FAILED or key in seen:
                continue
            if len(found) == BULK_LIMIT:
                return found, True
            seen.add(key)
            found.append(row.run)
        if listed.next_cursor is None:
            return found, False
        page = replace(page, cursor=decode_cursor(listed.next_cursor))
    return found, True


def jobs_of_module(store: Store, module: str) -> tuple[str, ...]:
    """The jobs the store holds for ``module``."""
    return tuple(store.module_jobs(module))


def _check_ack(run_id: str, run: RunRecord | None, resolved: Resolution | None) -> RunRecord:
    if run is None:
        raise ActionRefused(
            f"no run {run_id!r}: `jobhost failures` lists failures with their run ids",
            unknown=True,
        )
    if run.outcome not in FAILED:
        raise ActionRefused(
            f"run {run.id} of {run.job_name} is {run.outcome}, not a failure: only a failed, "
            "timed_out or abandoned run is acknowledged"
        )
    if resolved is not None:
        how = f"run {resolved.run_id} succeeded" if resolved.how == "succeeded" else "acknowledged"
        raise ActionRefused(
            f"run {run.id} of {run.job_name} is resolved already: {how}, by "
            f"{resolved.by or 'unknown'}"
        )
    return run


def open_failure_lines(store: Store, jobs: list[str], limit: int) -> list[tuple[str, str]]:
    """(job, line) for each of ``jobs`` with open failures: how many (of the newest ``limit``
    read), and its newest; what ``health``'s critical-jobs-last-run says."""
    found = open_failed_runs(store, jobs, limit)
    by_job: dict[str, list[RunRecord]] = {}
    for run in found:
        if run.outcome in FAILED:
            by_job.setdefault(run.job_name, []).append(run)
    lines = []
    # By job, as the other checks list jobs; the read gives each job's newest first.
    for job, runs in sorted(by_job.items()):
        newest = runs[0]
        first = (newest.error_message or "").strip().splitlines()
        error = f": {first[0]}" if first else ""
        more = "+" if len(found) >= limit else ""
        lines.append(
            (
                job,
                f"{job} has {len(runs)}{more} open failure(s), the newest run {newest.id} "
                f"{newest.outcome} at {short_utc(newest.finished_at)}{error} (`jobhost "
                f"failures --job {job}`; retry or acknowledge them)",
            )
        )
    return lines
