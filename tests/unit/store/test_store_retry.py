"""The one retry policy for store calls: what it retries, when it stops, what it logs."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from jobhost.store.engine import StoreRetry, is_store_down


def _store_down() -> OperationalError:
    return OperationalError(
        "SELECT 1", {}, Exception("connection to postgresql://app:s3cret@db/app refused")
    )


class _Flaky:
    """Fails with ``errors`` in turn, then answers ``done``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_a_store_outage_is_retried_until_the_store_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky = _Flaky(_store_down(), _store_down(), _store_down())
    retry = StoreRetry(what="heartbeat", waits=(0.0,))

    with caplog.at_level(logging.INFO, logger="jobhost.store"):
        result = retry.call(flaky)

    assert (result, flaky.calls) == ("done", 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per outage, not once per try
    assert warnings[0].startswith("heartbeat failed: store unreachable (OperationalError")
    assert "s3cret" not in warnings[0]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["heartbeat: the store answers again after 3 failed tries"]


def test_warn_each_warns_at_every_failure(caplog: pytest.LogCaptureFixture) -> None:
    retry = StoreRetry(what="signal watcher", waits=(0.0,), warn="each")

    with caplog.at_level(logging.WARNING, logger="jobhost.store"):
        retry.call(_Flaky(_store_down(), _store_down()))

    assert len(caplog.records) == 2


def test_an_error_that_is_not_an_outage_is_raised_at_once() -> None:
    refused = IntegrityError("INSERT", {}, Exception("unique violation"))
    flaky = _Flaky(refused)

    with pytest.raises(IntegrityError):
        StoreRetry(what="recording", waits=(0.0,)).call(flaky)

    assert flaky.calls == 1


def test_give_up_is_asked_after_every_try() -> None:
    asked: list[int] = []
    flaky = _Flaky(*(_store_down() for _ in range(10)))

    def give_up(tries: int) -> bool:
        asked.append(tries)
        return tries >= 2

    with pytest.raises(OperationalError):
        StoreRetry(what="recording", waits=(0.0,), give_up=give_up).call(flaky)

    assert (asked, flaky.calls) == ([1, 2], 2)


def test_the_waits_are_used_in_order_and_the_last_repeats() -> None:
    slept: list[float] = []
    stopping = threading.Event()
    retry = StoreRetry(what="recording", waits=(0.25, 0.5, 1.0), stopping=stopping)
    # A stopping event that is never set: record each pause instead of waiting it out.
    stopping.wait = lambda timeout=None: bool(slept.append(timeout or 0.0))  # type: ignore[method-assign]

    retry.call(_Flaky(*(_store_down() for _ in range(5))))

    assert slept == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_stopping_cuts_a_pause_short_and_raises_the_last_error() -> None:
    stopping = threading.Event()
    flaky = _Flaky(*(_store_down() for _ in range(10)))
    # The first failure sets the event: the hour-long pause that follows returns at once.
    retry = StoreRetry(
        what="heartbeat", waits=(3600.0,), stopping=stopping, on_failure=lambda _: stopping.set()
    )

    with pytest.raises(OperationalError):
        retry.call(flaky)

    assert flaky.calls == 1


def test_on_failure_sees_every_retried_error() -> None:
    seen: list[BaseException] = []
    errors = [_store_down(), _store_down()]

    StoreRetry(what="heartbeat", waits=(0.0,), on_failure=seen.append).call(_Flaky(*errors))

    assert seen == errors


def test_is_store_down_tells_an_outage_from_a_refusal() -> None:
    assert is_store_down(_store_down()) is True
    assert is_store_down(IntegrityError("INSERT", {}, Exception("duplicate"))) is False


def test_a_full_sqlite_file_is_the_store_away_and_a_bad_statement_is_not() -> None:
    # The driver's own error, as the engine's COMMIT meets it beneath SQLAlchemy's wrapping.
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE t (x)")
    connection.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.OperationalError) as full:
        for _ in range(100):
            connection.execute("INSERT INTO t VALUES (randomblob(1000))")
    with pytest.raises(sqlite3.OperationalError) as bad:
        connection.execute("SELECT * FROM missing")
    connection.close()
    assert "disk is full" in str(full.value)
    assert is_store_down(full.value)
    assert not is_store_down(bad.value)
