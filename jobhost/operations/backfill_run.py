"""A recorded backfill seen to its end: followed while hosts run it, or run in this process.

With live hosts the command only reads: the backfill's items counted by state, a line each time
the counts change. With no live host (or once every host is gone) it runs the rest itself
(``run_here``: a host in one-shot mode, limited to this backfill). Ctrl-C detaches: the backfill
stays in the store and any host continues it; runs this process started finish first (Ctrl-C
again abandons them to their lease).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from jobhost.clock import Clock
from jobhost.operations.backfill_view import progress_line
from jobhost.records import BackfillRecord
from jobhost.store import Store

__all__ = ["Followed", "hosts_alive", "see_through"]

_FOLLOW_SECONDS = 1.0
_HOST_CHECK_SECONDS = 2.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Followed:
    """Where following a backfill ended: ``record`` as the store has it; ``detached`` when
    the operator stopped following before it finished."""

    record: BackfillRecord
    detached: bool = False


def hosts_alive(store: Store, clock: Clock) -> bool:
    return bool(store.live_hosts()[1])


def see_through(
    store: Store,
    backfill_id: str,
    *,
    hosts: bool,
    run_here: Callable[[str], None],
    progress: Progress,
    clock: Clock,
) -> Followed:
    """Follow the backfill while ``hosts`` run it, and run it here (``run_here``) when there
    are none, until it is finished or the operator detaches."""
    try:
        if hosts:
            record = _follow(store, backfill_id, progress, clock)
            if record is not None:
                return Followed(record)
            progress("no live host any more: running the rest here")
        run_here(backfill_id)
    except KeyboardInterrupt:
        progress(
            f"detached: backfill {backfill_id} goes on in the store (jobhost backfill --show "
            f"{backfill_id}; --cancel {backfill_id} stops it)"
        )
        return Followed(_read(store, backfill_id, clock), detached=True)
    record = _read(store, backfill_id, clock)
    return Followed(record, detached=not record.finished)


def _follow(
    store: Store, backfill_id: str, progress: Progress, clock: Clock
) -> BackfillRecord | None:
    """Watch the hosts run the backfill; the record once finished, None once they are gone."""
    said = ""
    next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
    with store.change_signal() as signal:
        while True:
            record = _read(store, backfill_id, clock)
            line = progress_line(record)
            if line != said:
                said = line
                progress(line)
            if record.finished:
                return record
            if time.monotonic() >= next_host_check:
                next_host_check = time.monotonic() + _HOST_CHECK_SECONDS
                if not hosts_alive(store, clock):
                    return None
            signal.wait(_FOLLOW_SECONDS)


def _read(store: Store, backfill_id: str, clock: Clock) -> BackfillRecord:
    record = store.settled_backfill(backfill_id, clock)
    assert record is not None, f"backfill {backfill_id} disappeared"
    return record
