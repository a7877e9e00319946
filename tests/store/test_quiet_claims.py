"""A host's claims leave out the request and retry reads only while nothing can have been queued.

A host's ticker is ``announced``: the host tells it of signals and failed runs. While the last
turn saw no pending request and no retry due, its claims skip both reads; whatever is queued
without an announcement is seen by the turn's own wake-up read and claimed on the turn after.
Backfills are claimed on every turn, quiet or not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from jobhost.store.actions import request_run
from jobhost.store.backfills import create_backfill
from tests.support import ManualClock

YEARLY = {"name": "sample.yearly", "cron": "0 0 1 1 *"}
NIGHTLY = {"name": "sample.nightly", "cron": "0 3 * * *", "overlap": "allow", "max_concurrent": 5}
FAILING = {"name": "sample.failing", "cron": "0 0 1 1 *", "behaviour": "fail"}


def _at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, 10, minute, second, tzinfo=UTC)


def _announced(host: Any) -> Any:
    host.ticker._announced = True  # as a Host builds it
    return host


def _request(host: Any, job: str = "sample.yearly") -> str:
    with host.engine.begin() as connection:
        return request_run(connection, job, "ops", None, host.clock())


def _statements(host: Any) -> list[str]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(host.engine, "before_cursor_execute", count)
    return seen


def test_a_signalled_request_is_claimed_on_the_next_turn(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([YEARLY])
    _announced(host)
    clock.now = _at(0, 1)
    assert host.tick() == []
    _request(host)
    host.ticker.look_everywhere()  # the host's signal watcher hears of it
    (claim,) = host.tick()
    assert (claim.job_name, claim.source) == ("sample.yearly", "manual")


def test_an_unannounced_request_waits_one_turn_at_most(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([YEARLY])
    _announced(host)
    clock.now = _at(0, 1)
    assert host.tick() == []
    _request(host)
    # No signal: the quiet claim leaves the requests alone, its wake-up read sees one pending.
    assert host.tick() == []
    (claim,) = host.tick()
    assert claim.source == "manual"


def test_a_ticker_used_directly_reads_requests_on_every_claim(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([YEARLY])
    clock.now = _at(0, 1)
    assert host.tick() == []
    _request(host)
    (claim,) = host.tick()
    assert claim.source == "manual"


def test_a_quiet_claim_reads_fewer_statements(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([YEARLY])
    _announced(host)
    clock.now = _at(0, 1)
    host.tick()
    seen = _statements(host)
    host.tick()
    quiet = len(seen)
    host.ticker.look_everywhere()
    seen.clear()
    host.tick()
    assert quiet < len(seen)


def test_a_failed_run_announced_has_its_retry_claimed_when_due(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([{**FAILING, "max_attempts": 2, "backoff": "5s"}])
    _announced(host)
    clock.now = _at(0, 1)
    host.tick()
    _request(host, "sample.failing")
    host.ticker.look_everywhere()
    (first,) = host.tick()
    assert host.finish(first) == "failed"
    host.ticker.look_everywhere()  # the host's recorder hears of each run not succeeded
    assert host.tick() == []  # its retry is not due yet; the wake-up read names it
    clock.now += timedelta(seconds=6)
    (retry,) = host.tick()
    assert (retry.job_name, retry.attempt) == ("sample.failing", 2)


@pytest.mark.parametrize("announce", [True, False])
def test_a_backfill_is_claimed_on_the_next_turn_however_quiet(
    replicas: Any, clock: ManualClock, announce: bool
) -> None:
    (host,) = replicas([NIGHTLY])
    _announced(host)
    clock.now = _at(0, 1)
    host.tick()
    host.tick()
    with host.engine.begin() as connection:
        backfill_id = create_backfill(
            connection,
            job="sample.nightly",
            start=datetime(2026, 5, 1, 3, tzinfo=UTC),
            end=datetime(2026, 5, 1, 4, tzinfo=UTC),
            mode="all",
            reason=None,
            actor="ops",
            concurrency=1,
            occurrences=[datetime(2026, 5, 1, 3, tzinfo=UTC)],
            now=clock(),
        )
    if announce:
        host.ticker.look_everywhere()
        (claim,) = host.tick()
    else:
        # Unheard, it is seen by the turn's wake-up read, which makes the next turn come at once.
        assert host.ticker.tick(clock(), 1).next_wake == clock()
        (claim,) = host.tick()
    assert claim.backfill_id == backfill_id
