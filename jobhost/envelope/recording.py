"""Recording ended runs: the one write every run's outcome takes, then what follows from it.

The host's recorder thread writes many runs at once and a command's run writes its one, but
both go through :func:`write_outcomes` (the run's last log lines and its outcome in one
transaction, and the ledger's own word for any run this host no longer holds) and
:func:`settle` (what is logged and reported once the ledger has answered). They differ only in
how long they keep trying while the store is away, which the caller decides.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from jobhost_contracts import UnitCounts

from jobhost.catalog import JobSpec
from jobhost.envelope.execution import Outcome
from jobhost.envelope.runlog import RunLog
from jobhost.records import Claim, LogWrites
from jobhost.records import Outcome as LedgerOutcome

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    from jobhost.clock import Clock
    from jobhost.store import Store

__all__ = ["Executed", "Finished", "Recorded", "settle", "write_outcomes"]

_log = logging.getLogger("jobhost.envelope")


class _Envelope(Protocol):
    """What recording uses of :class:`~jobhost.envelope.envelope.RunEnvelope`."""

    def finishing_logs(self, executed: Sequence[Executed]) -> AbstractContextManager[LogWrites]: ...

    def ledger_outcome(
        self, claim: Claim, spec: JobSpec, executed: Executed, finished_at: datetime
    ) -> LedgerOutcome: ...

    def report(
        self,
        claim: Claim,
        spec: JobSpec,
        executed: Executed,
        finished_at: datetime,
        verdict: str | None = None,
        *,
        started_at: datetime | None = None,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Executed:
    """A run that has executed: its outcome and the trace it belongs to."""

    outcome: Outcome
    trace_id: str | None
    units: UnitCounts | None = None
    """Counts of a run that fanned out over units (``context.fan_out``)."""
    began: datetime | None = None
    ended: datetime | None = None
    """The executor's own start and end, on this host's clock; None when it never ran."""
    run_log: RunLog | None = None
    """The run's log lines not yet written, when the host keeps run logs."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A run whose executor is done, waiting for its outcome to reach the ledger."""

    claim: Claim
    spec: JobSpec
    executed: Executed


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the ledger said to one finished run's outcome."""

    finished: Finished
    entry: LedgerOutcome
    """The outcome as this host wrote (or tried to write) it."""
    recorded: bool
    """The row took this host's outcome."""
    verdict: str | None
    """The ledger's own outcome when it did not (``running``: the database refused the row)."""
    written_at: datetime


def write_outcomes(
    envelope: _Envelope,
    store: Store,
    host_id: str,
    batch: Sequence[Finished],
    *,
    clock: Clock,
    store_time: Clock | None,
    isolate: bool = False,
) -> list[Recorded]:
    """Write ``batch``'s outcomes (and their runs' last log lines) in one transaction.

    Raises what the store raises; ``isolate`` writes each row on its own, so a row the database
    refuses costs only itself (it comes back with the verdict ``running``).
    """
    with envelope.finishing_logs([f.executed for f in batch]) as logs:
        done = store.record_finished(
            host_id,
            outcomes_at=lambda now: [
                envelope.ledger_outcome(f.claim, f.spec, f.executed, now) for f in batch
            ],
            logs=logs,
            clock=clock,
            store_time=store_time,
            isolate=isolate,
        )
    entries, recorded, verdicts, now = done.entries, done.recorded, done.verdicts, done.now
    return [
        Recorded(
            finished,
            entry,
            finished.claim.run_id in recorded,
            verdicts.get(finished.claim.run_id),
            now,
        )
        for finished, entry in zip(batch, entries, strict=True)
    ]


def settle(envelope: _Envelope, done: Recorded) -> None:
    """Say what the ledger answered, and queue the run's metrics and audit record."""
    finished, entry = done.finished, done.entry
    claim = finished.claim
    outcome = finished.executed.outcome.outcome
    if not done.recorded:
        _log.warning(
            "job %s run %s finished %s, but the ledger already says %s: "
            "its lease had been taken over",
            claim.job_name,
            claim.run_id,
            outcome,
            done.verdict,
        )
    elif entry.retry is not None:
        _log.info(
            "job %s: attempt %d %s; retry in %.1fs",
            claim.job_name,
            claim.attempt,
            outcome,
            (entry.retry.not_before - done.written_at).total_seconds(),
        )
    try:
        envelope.report(
            claim,
            finished.spec,
            finished.executed,
            entry.end.finished_at,
            done.verdict,
            started_at=entry.started_at or claim.started_at,
        )
    except Exception:  # reporting must never undo a recorded outcome
        _log.exception("job %s run %s: reporting failed", claim.job_name, claim.run_id)
