"""``context.fan_out``: the contract's own behaviour, on a state held in memory.

The host's durable, fenced state is exercised in tests/store/test_fan_out_runs.py; here the
state is a plain dictionary so every rule can be shown quickly and exactly.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from types import MappingProxyType

import pytest
from jobhost_contracts import (
    Cancellation,
    FanOutFailed,
    JobCancelled,
    JobContext,
    StaleLeaseError,
    TriggerSource,
    UnitCounts,
)
from returns.result import Failure, Result, Success

TENANTS = [f"tenant-{i:02d}" for i in range(20)]


class MemoryState:
    """The state API in memory; ``lose_lease_after`` marks make the next one stale."""

    def __init__(self, lose_lease_after: int | None = None) -> None:
        self.done: dict[str, str] = {}
        self.marks = 0
        self._lose_after = lose_lease_after
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        return self.done.get(key)

    def set(self, key: str, value: str) -> None:
        self.done[key] = value

    def record(self, idempotency_key: str) -> bool:
        with self._lock:
            if self._lose_after is not None and self.marks >= self._lose_after:
                raise StaleLeaseError(
                    "sample.purge", 1, 2, run_id="r1", reason="recorded abandoned"
                )
            self.marks += 1
            fresh = idempotency_key not in self.done
            self.done[idempotency_key] = "done"
            return fresh

    def seen(self, idempotency_key: str) -> bool:
        return idempotency_key in self.done


def context(
    state: MemoryState, *, attempt: int = 1, cancellation: Cancellation | None = None
) -> JobContext:
    return JobContext(
        job_name="sample.purge",
        run_id=f"run-{attempt}",
        occurrence=datetime(2026, 3, 29, 2, 0, tzinfo=UTC),
        attempt=attempt,
        source=TriggerSource.SCHEDULE,
        idempotency_key="sample.purge:2026-03-29T02:00:00Z",
        fencing_token=attempt,
        config=MappingProxyType({}),
        logger=logging.getLogger("test.fan_out"),
        cancellation=cancellation or Cancellation(),
        state=state,
    )


def ok(_tenant: str) -> Result[None, str]:
    return Success(None)


def test_every_unit_runs_once_and_the_counts_say_so() -> None:
    state = MemoryState()
    ran: list[str] = []
    ctx = context(state)

    result = ctx.fan_out(TENANTS, lambda t: (ran.append(t), Success(None))[1])

    assert result == Success(UnitCounts(total=20, succeeded=20, failed=0, skipped_already_done=0))
    assert ran == TENANTS
    assert ctx.unit_tally.counts() == UnitCounts(20, 20, 0, 0)
    # Marked under the occurrence's key, so another occurrence starts afresh.
    assert "sample.purge:2026-03-29T02:00:00Z#unit:tenant-00" in state.done


def test_a_failed_unit_fails_the_fan_out_and_is_retried_alone() -> None:
    state = MemoryState()
    refused = {"tenant-03", "tenant-11"}

    def purge(tenant: str) -> Result[None, str]:
        return Failure(f"{tenant} refused") if tenant in refused else Success(None)

    first = context(state, attempt=1).fan_out(TENANTS, purge)
    match first:
        case Failure(FanOutFailed() as failed):
            assert failed.counts == UnitCounts(20, 18, 2, 0)
            assert failed.failed_keys == ["tenant-03", "tenant-11"]
            assert str(failed) == (
                "2 of 20 units failed: tenant-03: tenant-03 refused; tenant-11: tenant-11 refused"
            )
        case _:
            pytest.fail(f"expected a FanOutFailed, got {first}")

    refused.clear()
    ran: list[str] = []
    second = context(state, attempt=2).fan_out(TENANTS, lambda t: (ran.append(t), Success(None))[1])
    assert ran == ["tenant-03", "tenant-11"]
    assert second == Success(UnitCounts(20, 2, 0, 18))


def test_the_failure_names_the_first_n_and_the_total() -> None:
    result = context(MemoryState()).fan_out(TENANTS, lambda t: Failure("down"), report_failures=3)
    failed = result.failure()
    assert isinstance(failed, FanOutFailed)
    assert failed.failed_keys == ["tenant-00", "tenant-01", "tenant-02"]
    assert str(failed).endswith("tenant-02: down; and 17 more")
    assert str(failed).startswith("20 of 20 units failed: ")


def test_an_exception_fails_its_unit_only_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def purge(tenant: str) -> Result[None, str]:
        if tenant == "tenant-05":
            raise KeyError("no such schema")
        return Success(None)

    result = context(MemoryState()).fan_out(TENANTS, purge)
    failed = result.failure()
    assert failed.counts == UnitCounts(20, 19, 1, 0)
    assert "tenant-05: KeyError: 'no such schema'" in str(failed)
    assert any(r.exc_info and "tenant-05" in r.getMessage() for r in caplog.records)


def test_stop_after_failures_starts_no_further_unit() -> None:
    ran: list[str] = []

    def purge(tenant: str) -> Result[None, str]:
        ran.append(tenant)
        return Failure("down")

    result = context(MemoryState()).fan_out(TENANTS, purge, stop_after_failures=2)
    failed = result.failure()
    assert ran == ["tenant-00", "tenant-01"]
    assert failed.counts.not_started == 18
    assert "2 of 20 units failed; 18 not started" in str(failed)


def test_cancellation_is_honoured_between_units() -> None:
    cancellation = Cancellation()
    state = MemoryState()
    ctx = context(state, cancellation=cancellation)

    def purge(tenant: str) -> Result[None, str]:
        if tenant == "tenant-04":
            cancellation.cancel("shutdown")
        return Success(None)

    with pytest.raises(JobCancelled):
        ctx.fan_out(TENANTS, purge)
    # The unit in hand finished and was marked; none started after it.
    assert ctx.unit_tally.counts() == UnitCounts(20, 5, 0, 0)
    assert len(state.done) == 5


def test_a_stale_run_stops_at_its_next_mark() -> None:
    state = MemoryState(lose_lease_after=7)
    ctx = context(state)
    ran: list[str] = []
    with pytest.raises(StaleLeaseError):
        ctx.fan_out(TENANTS, lambda t: (ran.append(t), Success(None))[1])
    assert len(ran) == 8  # the eighth unit's mark was refused; no ninth started
    assert ctx.unit_tally.counts() == UnitCounts(20, 7, 0, 0)


def test_concurrency_is_bounded_and_every_unit_runs_once() -> None:
    lock = threading.Lock()
    running = 0
    peak = 0
    ran: list[str] = []

    def purge(tenant: str) -> Result[None, str]:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            ran.append(tenant)
        time.sleep(0.01)
        with lock:
            running -= 1
        return Success(None)

    result = context(MemoryState()).fan_out(TENANTS, purge, concurrency=4)
    assert result == Success(UnitCounts(20, 20, 0, 0))
    assert sorted(ran) == TENANTS
    assert 1 < peak <= 4


def test_a_stale_mark_under_concurrency_lets_the_others_finish_then_raises() -> None:
    state = MemoryState(lose_lease_after=5)
    with pytest.raises(StaleLeaseError):
        context(state).fan_out(TENANTS, ok, concurrency=3)
    assert state.marks == 5


def test_units_need_distinct_non_empty_keys() -> None:
    with pytest.raises(ValueError, match="two units share the key 'a'"):
        context(MemoryState()).fan_out(["a", "b", "a"], ok)
    with pytest.raises(ValueError, match="non-empty str"):
        context(MemoryState()).fan_out([""], ok)


def test_a_long_key_is_stored_within_the_states_limit_and_stays_distinct() -> None:
    state = MemoryState()
    units = ["x" * 400, "x" * 399 + "y"]
    assert context(state).fan_out(units, ok) == Success(UnitCounts(2, 2, 0, 0))
    assert len(state.done) == 2
    assert all(len(key) <= 300 for key in state.done)
    assert context(state, attempt=2).fan_out(units, ok) == Success(UnitCounts(2, 0, 0, 2))
