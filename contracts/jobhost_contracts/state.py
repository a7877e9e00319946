"""A job's durable state, and the error a run gets when it writes after losing its lease."""

from __future__ import annotations

from typing import Protocol

__all__ = ["JobState", "StaleLeaseError"]


class StaleLeaseError(Exception):
    """A state write from a run that lost its lease (expired, or another replica took the job
    over): its writes must stop. ``run_id`` and ``reason`` say which run and why, if known."""

    def __init__(
        self,
        job: str,
        token: int,
        current: int,
        *,
        run_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        if run_id is None:
            message = (
                f"job {job!r}: state write with fencing token {token} rejected, "
                f"the lease is now held with token {current}"
            )
        else:
            message = (
                f"job {job!r}: run {run_id} no longer holds its lease "
                f"({reason or 'lost'}); its state write with fencing token {token} was rejected"
            )
        super().__init__(message)
        self.job = job
        self.token = token
        self.current = current
        self.run_id = run_id
        self.reason = reason


class JobState(Protocol):
    """Durable per-job state, kept in the host's store and fenced by the run's lease.

    Every write carries the run's fencing token: once another replica holds a newer lease, the
    write raises :class:`StaleLeaseError`, so a stale run cannot move a cursor backwards or mark
    work done twice.
    """

    def get(self, key: str) -> str | None:
        """The value last stored under ``key`` for this job, or None."""

    def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` (a cursor, a watermark)."""

    def record(self, idempotency_key: str) -> bool:
        """Mark a unit of work done; False when it had already been recorded."""

    def seen(self, idempotency_key: str) -> bool:
        """Whether a unit of work was recorded done by any earlier run of this job."""
