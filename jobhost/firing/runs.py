"""What a host holds for each of its runs, and the records it writes for runs it cannot finish:
a stuck executor's mark, a run cut short by shutdown."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from jobhost_contracts import Cancellation

from jobhost.catalog import JobSpec
from jobhost.envelope.envelope import Executed
from jobhost.envelope.execution import Outcome
from jobhost.firing.recorder import Finished
from jobhost.records import Claim
from jobhost.store import Store

__all__ = ["HeldRun", "cancelled_by_shutdown", "mark_stuck"]

_log = logging.getLogger("jobhost.host")


@dataclass
class HeldRun:
    """One run this host holds: executing, stuck, or waiting for its outcome's record."""

    claim: Claim
    spec: JobSpec
    cancellation: Cancellation
    lease: timedelta
    finished: bool = False
    """The executor is done (or given up on); the outcome is on its way to the ledger."""
    stuck: bool = False
    """The executor ignored its cancellation and runs on, holding its worker."""
    start_at: float | None = None
    """When (monotonic) a run claimed before its occurrence may start; None: at once."""


def mark_stuck(store: Store, item: HeldRun, verdict: Outcome, host_id: str) -> None:
    """Say in the ledger that the run's executor ignored cancellation and its thread runs on."""
    message = (
        f"stuck: {verdict.error_message}; its thread still runs, so the run keeps "
        "its slot and lease until it ends"
    )
    try:
        store.mark_run_stuck(item.claim.run_id, host_id, message)
    except Exception as error:
        _log.warning("could not mark run %s stuck: %s", item.claim.run_id, error)


def cancelled_by_shutdown(item: HeldRun, grace: float) -> Finished:
    """The outcome of a run whose executor did not stop within the shutdown grace."""
    return Finished(
        item.claim,
        item.spec,
        Executed(
            Outcome(
                "cancelled",
                error_type="Shutdown",
                error_message=f"host shut down; the executor did not stop within {grace:g}s",
            ),
            None,
        ),
    )
