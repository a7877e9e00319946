"""A host's heartbeat: renew its incarnation and the leases of its runs, cancel what it lost.

It runs on a thread of its own every ``heartbeat_interval``; a failed beat is retried once soon
after, and every failure tells the host the store is away (its abandon pass then waits).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from jobhost.clock import Clock
from jobhost.envelope.telemetry import Telemetry
from jobhost.firing.runs import HeldRun
from jobhost.store import Store
from jobhost.store.retrying import StoreRetry

__all__ = ["beat_until_stopped", "renew_leases"]

_log = logging.getLogger("jobhost.host")
_RETRY = 1.0


def beat_until_stopped(
    interval: float,
    stopping: threading.Event,
    beat_once: Callable[[], None],
    on_failure: Callable[[BaseException], None],
) -> None:
    """Call ``beat_once`` every ``interval`` seconds until ``stopping`` is set."""
    retry = StoreRetry(
        what="heartbeat",
        waits=(min(interval, _RETRY),),
        # The heartbeat thread must outlive any one failure.
        retry_on=lambda error: isinstance(error, Exception),
        stopping=stopping,
        on_failure=on_failure,
    )
    while not stopping.wait(interval):
        # Raises only when stopping while the store is away: nothing is left to renew.
        with contextlib.suppress(Exception):
            retry.call(beat_once)


def renew_leases(
    store: Store,
    host_id: str,
    clock: Clock,
    running: Sequence[HeldRun],
    *,
    schedule_lag: float,
    with_groups: bool,
    telemetry: Telemetry,
) -> None:
    """One beat: renew the host and every lease of ``running``; cancel the runs whose lease
    another host took over."""
    by_lease: dict[timedelta, list[str]] = {}
    for item in running:
        by_lease.setdefault(item.lease, []).append(item.claim.run_id)
    beat = store.beat(
        host_id,
        clock,
        leases=by_lease,
        schedule_lag=schedule_lag,
        with_groups=with_groups,
    )
    lost = beat.lost
    if beat.groups is not None:
        telemetry.group_running = {g.name: g.running for g in beat.groups}
    for item in running:
        # A run that finished meanwhile was just recorded: its lease is gone, nothing lost.
        if item.claim.run_id in lost and not item.finished:
            _log.warning(
                "job %s run %s lost its lease; cancelling it",
                item.claim.job_name,
                item.claim.run_id,
            )
            item.cancellation.cancel("lease lost")
