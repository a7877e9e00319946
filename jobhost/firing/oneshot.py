"""One-shot mode: with no host alive, ``jobhost trigger``, ``retry`` and ``backfill`` start a
host in their own process that claims only the runs the command queued (through the claim every
host makes, so nothing runs twice) and stops once all it took is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jobhost.catalog import JobSpec
from jobhost.firing.slots import WorkerSlots
from jobhost.operations.backfills import progress_line
from jobhost.rules import FiringRules
from jobhost.store import Store

__all__ = ["BackfillRuns", "Claimer", "OneShotWork", "PendingRuns"]

Progress = Callable[[str], None]

LOOK_SECONDS = 1.0
"""The longest sleep between two turns: a backfill's retry comes due with nothing to wake it."""


class OneShotWork(Protocol):
    progress: Progress

    def turn(self, slots: WorkerSlots, asked: Mapping[str, str]) -> float | None:
        """Claim what may start, say the cancels that just reached runs (``asked``: run id →
        reason); None once all is recorded, else the seconds before the next turn."""
        ...

    def cancel(self, slots: WorkerSlots, reason: str) -> None:
        """Claim nothing more, and cancel the runs held."""

    def interrupted(self, slots: WorkerSlots) -> None:
        """The operator pressed Ctrl-C once."""


@dataclass(frozen=True)
class Claimer:
    """What a one-shot host's work claims with, and where it says what it does."""

    store: Store
    jobs: Mapping[str, JobSpec]
    host_id: str
    rules: FiringRules
    progress: Progress


class PendingRuns:
    """The pending runs ``run_ids`` (a manual request, a retry); Ctrl-C cancels them."""

    def __init__(self, by: Claimer, run_ids: Sequence[str]) -> None:
        self._by = by
        self.progress = by.progress
        self._run_ids = list(run_ids)
        self.taken: set[str] = set()
        self._cancelled: str | None = None

    def turn(self, slots: WorkerSlots, asked: Mapping[str, str]) -> float | None:
        for reason in asked.values():
            self.progress(f"cancel asked {reason}: cancelling the run")
        by = self._by
        while self._run_ids and self._cancelled is None:
            batch = by.store.claim(
                host_id=by.host_id, rules=by.rules, clock=by.store.clock, run_id=self._run_ids[0]
            ).batch
            self._run_ids.pop(0)
            for claim in batch.claims:
                self.taken.add(claim.run_id)
                self.progress(f"running here as host {by.host_id} (run {claim.run_id})")
                slots.submit(claim, by.jobs[claim.job_name])
            if self._cancelled is not None:  # while this claim was on its way
                _cancel_held(slots, self._cancelled)
        return LOOK_SECONDS if slots.runs() else None

    def cancel(self, slots: WorkerSlots, reason: str) -> None:
        self._cancelled = reason
        _cancel_held(slots, reason)

    def interrupted(self, slots: WorkerSlots) -> None:
        self.progress("interrupted: cancelling the run (Ctrl-C again to abandon it)")
        self.cancel(slots, "interrupted by the operator")


class BackfillRuns:
    """The occurrences of backfill ``backfill_id`` and their retries, in the host's free
    workers; a line each time its counts change. Ctrl-C stops the claims."""

    def __init__(self, by: Claimer, backfill_id: str) -> None:
        self._by = by
        self.progress = by.progress
        self._backfill_id = backfill_id
        self._claiming = True
        self._said = ""

    def turn(self, slots: WorkerSlots, asked: Mapping[str, str]) -> float | None:
        for run_id, reason in asked.items():
            self.progress(f"cancel asked {reason}: cancelling run {run_id}")
        by = self._by
        free = slots.free()[0] if self._claiming else 0
        if free > 0:
            for claim in by.store.claim(
                host_id=by.host_id,
                rules=by.rules,
                clock=by.store.clock,
                slots=free,
                backfill_id=self._backfill_id,
            ).batch.claims:
                self.progress(
                    f"running {claim.occurrence:%Y-%m-%dT%H:%M:%SZ} here "
                    f"(run {claim.run_id}, attempt {claim.attempt})"
                )
                slots.submit(claim, by.jobs[claim.job_name])
        record = by.store.settle_backfill(self._backfill_id, by.store.clock)
        assert record is not None, f"backfill {self._backfill_id} disappeared"
        line = progress_line(record)
        if line != self._said:
            self._said = line
            self.progress(line)
        done = not slots.runs() and (record.finished or not self._claiming)
        return None if done else LOOK_SECONDS

    def cancel(self, slots: WorkerSlots, reason: str) -> None:
        self._claiming = False
        _cancel_held(slots, reason)

    def interrupted(self, slots: WorkerSlots) -> None:
        self._claiming = False
        self.progress(
            "interrupted: claiming no more; the runs in flight finish "
            "(Ctrl-C again to leave them to their lease)"
        )


def _cancel_held(slots: WorkerSlots, reason: str) -> None:
    for cancellation in slots.held().values():
        cancellation.cancel(reason)
