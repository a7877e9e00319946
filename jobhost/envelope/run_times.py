"""A run's times are its executor's: when it started and ended, not when the store heard of it.

The envelope reads the host's clock around the executor. The ledger keeps the store's clock
(PostgreSQL's on several replicas), so the host's readings are moved by the difference between
the two clocks, read when the outcome is written, and kept within what the store saw: not
before the claim, not after the write.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["run_times"]


def run_times(
    claimed_at: datetime,
    began: datetime | None,
    ended: datetime | None,
    written_at: datetime,
    host_now: datetime,
) -> tuple[datetime, datetime]:
    """(start, end) on the store's clock; ``host_now`` is the host's clock at ``written_at``.

    A run whose executor never ran (cancelled at shutdown) spans its claim to its write.
    """
    if began is None or ended is None:
        return claimed_at, max(written_at, claimed_at)
    skew = written_at - host_now
    start = min(max(began + skew, claimed_at), written_at)
    end = min(max(ended + skew, start), max(written_at, start))
    return start, end
