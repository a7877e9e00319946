"""``Cancellation.drive``: the awaitable's task ends when the run is cancelled, as the host runs
an async executor, and runs to its end otherwise."""

from __future__ import annotations

import asyncio
import threading

import pytest
from jobhost_contracts import Cancellation


def test_drive_returns_what_the_awaitable_returns() -> None:
    async def work() -> str:
        await asyncio.sleep(0)
        return "done"

    assert asyncio.run(Cancellation().drive(work())) == "done"


def test_a_cancellation_from_another_thread_cancels_the_task() -> None:
    cancellation = Cancellation()
    started = threading.Event()
    cleaned_up: list[bool] = []

    async def work() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned_up.append(True)
        return "not reached"

    canceller = threading.Thread(target=lambda: started.wait(5) and cancellation.cancel("shutdown"))
    canceller.start()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(asyncio.wait_for(cancellation.drive(work()), timeout=10))
    canceller.join()
    assert cleaned_up == [True]
    assert cancellation.reason == "shutdown"


def test_a_run_cancelled_before_the_drive_never_lets_the_work_finish() -> None:
    cancellation = Cancellation()
    cancellation.cancel("timeout")
    finished: list[bool] = []

    async def work() -> None:
        await asyncio.sleep(60)
        finished.append(True)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(asyncio.wait_for(cancellation.drive(work()), timeout=10))
    assert finished == []
