"""A host's upkeep never makes a due run late.

The pass for dead runs made now and then, with no lease expired, is a duty of the host's
maintenance thread, not of a turn; a pass made because a lease expired comes before the claim
(it may let the claim succeed), and the instant the turn sleeps from is taken after it, in the
claim, so that the next turn wakes at its occurrence and not early by what the pass took.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, text, update

from jobhost.firing.tick import Duty, Maintenance
from jobhost.store.schema import schedules
from tests.support import ManualClock

EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}
YEARLY = {"name": "sample.yearly", "cron": "0 0 1 1 *"}
_DEAD_RUN_READ = "runs.lease_expires_at <"
"""What the dead-run pass's first statement says, and no claim statement does."""


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 5, 4, hour, minute, second, tzinfo=UTC)


def _statements(engine: Any) -> list[tuple[float, str]]:
    seen: list[tuple[float, str]] = []

    def note(*args: Any) -> None:
        seen.append((time.monotonic(), " ".join(str(args[2]).split())))

    event.listen(engine, "before_cursor_execute", note)
    return seen


def test_the_pass_now_and_then_is_a_duty_not_a_turn(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas([EVERY_MINUTE])
    clock.now = _at(10, 0, 1)
    (first,) = host.tick()
    assert host.finish(first) == "succeeded"
    seen = _statements(host.engine)
    clock.now = _at(10, 1, 0)

    (claim,) = host.tick()
    assert claim.occurrence == _at(10, 1)
    assert not [text for _, text in seen if _DEAD_RUN_READ in text]

    host.ticker.abandon(clock())
    assert [text for _, text in seen if _DEAD_RUN_READ in text], "the duty made no pass"


def test_a_pass_for_an_expired_lease_comes_first_and_the_turn_sleeps_from_after_it(
    replicas: Any, clock: ManualClock
) -> None:
    dead, survivor = replicas([EVERY_MINUTE], count=2, lease_duration="20s")
    clock.now = _at(10, 0, 1)
    (lost,) = dead.tick()
    clock.now = _at(10, 0, 10)
    assert survivor.tick() == []  # its wake-up read sees the lease end at 10:00:21
    seen = _statements(survivor.engine)
    clock.now = _at(10, 1, 0)

    result = survivor.ticker.tick(clock(), 8)

    texts = [text for _, text in seen]
    claimed = next(i for i, text in enumerate(texts) if text.startswith("INSERT INTO runs"))
    passes = [i for i, text in enumerate(texts) if _DEAD_RUN_READ in text]
    assert [c.occurrence for c, _ in result.claims] == [_at(10, 1)]
    assert passes and passes[0] < claimed, texts
    assert result.read_at is not None and result.read_at > seen[passes[-1]][0]
    # Abandoned first, the dead run no longer holds the job: its next occurrence is claimed.
    assert lost.run_id not in {c.run_id for c, _ in result.claims}


def test_a_failing_pass_leaves_the_claims_alone_and_is_said_and_tried_again(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas([EVERY_MINUTE, YEARLY])
    clock.now = _at(10, 0, 1)
    (first,) = host.tick()
    assert host.finish(first) == "succeeded"
    with host.engine.begin() as connection:
        # A lease of a host long gone on a job with no run: the pass frees it, and fails.
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == YEARLY["name"])
            .values(lease_owner="ghost", lease_expires_at=_at(10, 0, 2), lease_run_id="gone")
        )
    _refuse_freeing_ghost_leases(host.engine)
    clock.now = _at(10, 1, 0)

    result = host.ticker.tick(clock(), 8)

    assert [(c.job_name, c.occurrence) for c, _ in result.claims] == [
        (EVERY_MINUTE["name"], _at(10, 1))
    ]
    duty = Duty("looking for dead runs", timedelta(seconds=0.01), host.ticker.abandon)
    failures: list[str] = []
    tried_twice = threading.Event()

    def failed(name: str, _error: Exception) -> None:
        failures.append(name)
        if len(failures) == 2:
            tried_twice.set()

    maintenance = Maintenance([duty], now=clock, on_failure=failed)
    maintenance.start()
    try:
        deadline = time.monotonic() + 10
        while not tried_twice.wait(0.02) and time.monotonic() < deadline:
            maintenance.turned()  # as the loop does after each turn
    finally:
        maintenance.stop()
    assert tried_twice.is_set()
    assert failures[:2] == [duty.name] * 2


def _refuse_freeing_ghost_leases(engine: Any) -> None:
    """A database trigger that fails the freeing of the ghost host's leases."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_free BEFORE UPDATE ON schedules "
                    "WHEN OLD.lease_owner = 'ghost' AND NEW.lease_owner IS NULL "
                    "BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
                )
            )
            return
        connection.execute(
            text(
                "CREATE FUNCTION refuse_free() RETURNS trigger AS $$ BEGIN "
                "IF OLD.lease_owner = 'ghost' AND NEW.lease_owner IS NULL THEN "
                "RAISE EXCEPTION 'refused by a test trigger'; END IF; RETURN NEW; END $$ "
                "LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text(
                "CREATE TRIGGER refuse_free BEFORE UPDATE ON schedules "
                "FOR EACH ROW EXECUTE FUNCTION refuse_free()"
            )
        )
