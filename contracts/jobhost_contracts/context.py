"""What the host hands an executor for one run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from returns.result import Result

from jobhost_contracts.cancellation import Cancellation
from jobhost_contracts.state import JobState
from jobhost_contracts.units import FanOutFailed, Unit, UnitCounts, UnitTally, run_fan_out

__all__ = ["JobContext", "TriggerSource", "frozen"]


class TriggerSource(StrEnum):
    """Why a run started."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    RETRY = "retry"
    CATCH_UP = "catch-up"
    BACKFILL = "backfill"


@dataclass(frozen=True, kw_only=True)
class JobContext:
    """Everything an executor may know about the run it is executing.

    ``occurrence`` is the scheduled instant in UTC (None for a manual run; for a backfill, the
    past occurrence it replays). ``idempotency_key`` is the same for every attempt of one
    occurrence, so side effects outside the database can be deduplicated by it (a backfill in
    mode ``all`` has a key of its own: see semantics.md). ``config`` is the module's
    ``[modules.NAME]`` section, read-only.
    """

    job_name: str
    run_id: str
    occurrence: datetime | None
    attempt: int
    source: TriggerSource
    idempotency_key: str
    fencing_token: int
    config: Mapping[str, Any]
    logger: logging.Logger
    cancellation: Cancellation
    state: JobState
    unit_tally: UnitTally = field(default_factory=UnitTally, compare=False)
    """Where :meth:`fan_out` adds its counts; the host reads them into the ledger and the span."""

    def fan_out(
        self,
        units: Iterable[Unit],
        work: Callable[[Unit], Result[Any, Any]],
        *,
        key: Callable[[Unit], str] = str,
        concurrency: int = 1,
        stop_after_failures: int | None = None,
        report_failures: int = 10,
    ) -> Result[UnitCounts, FanOutFailed]:
        """Run ``work(unit)`` for each of ``units``, each unit done once per occurrence.

        ``key(unit)`` names a unit (unique, stable across runs: a tenant id). A unit whose work
        returns ``Success`` is marked done in :attr:`state` under this occurrence's
        :attr:`idempotency_key`; a retry, or the run that takes the occurrence over after a
        crash, skips it. ``Failure`` (or an exception, logged) fails that unit only; it is not
        marked, so the next attempt runs it again. Up to ``concurrency`` units run at once, in
        threads. No unit starts once the run is cancelled (then ``JobCancelled`` is raised) or
        after ``stop_after_failures`` failures; a run that lost its lease stops at its next
        mark with ``StaleLeaseError``.

        Returns ``Success(UnitCounts)`` when no unit failed, else ``Failure(FanOutFailed)``
        naming the first ``report_failures`` failed units and the total. Return it (or a
        result built from it) from ``execute`` so the run is failed and retried.
        """
        return run_fan_out(
            units,
            work,
            state=self.state,
            cancellation=self.cancellation,
            scope=self.idempotency_key,
            tally=self.unit_tally,
            logger=self.logger,
            key=key,
            concurrency=concurrency,
            stop_after_failures=stop_after_failures,
            report_failures=report_failures,
        )


def frozen(value: Any) -> Any:
    """``value`` read-only all the way down, as the host hands a section over (a mapping as a
    ``MappingProxyType``, a list as a tuple): a write into one would change what every other
    module and every later run sees."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(item) for item in value)
    return value
