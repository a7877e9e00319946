"""Recording what ran, one transaction per call: finished runs' outcomes with the last lines of
their logs (whoever sees a run finished sees all its lines), and log lines of runs still going.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.records import LogWrites, Outcome
from jobhost.store.engine import database_now
from jobhost.store.ledger import ledger_verdicts, record_outcomes
from jobhost.store.runlogs import append_chunks, trim_lines

__all__ = ["Recorded", "record_finished", "write_logs"]


@dataclass(frozen=True)
class Recorded:
    """What :func:`record_finished` wrote: at what instant, which outcomes, which of them the
    ledger took (``recorded``), and the ledger's own outcome of each of the others."""

    now: datetime
    entries: list[Outcome]
    recorded: set[str]
    verdicts: dict[str, str] = field(default_factory=dict)


def record_finished(
    engine: Engine,
    host_id: str,
    *,
    outcomes_at: Callable[[datetime], Sequence[Outcome]],
    logs: LogWrites,
    clock: Clock,
    store_time: Clock | None = None,
    isolate: bool = True,
) -> Recorded:
    """Write ``logs`` and record the outcomes ``outcomes_at(now)`` gives, ``now`` being the
    store's instant (``store_time()`` when given); see
    :func:`~jobhost.store.ledger.record_outcomes` for ``isolate``."""
    with engine.begin() as connection:
        _write(connection, logs)
        now = store_time() if store_time is not None else database_now(connection, clock)
        entries = list(outcomes_at(now))
        recorded = record_outcomes(connection, host_id, entries, now, isolate=isolate)
        others: Collection[str] = [e.run_id for e in entries if e.run_id not in recorded]
        verdicts = ledger_verdicts(connection, others)
    return Recorded(now, entries, recorded, verdicts)


def write_logs(engine: Engine, logs: LogWrites) -> None:
    """Write run-log lines of runs still going, in a transaction of their own."""
    with engine.begin() as connection:
        _write(connection, logs)


def _write(connection: Connection, logs: LogWrites) -> None:
    for run_id, above, below in logs.trims:
        trim_lines(connection, run_id, above=above, below=below)
    append_chunks(connection, logs.chunks)
