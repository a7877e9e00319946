"""A summary is built with the cyclic collector paused, and the collector is as it was after."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from jobhost.operations.report import uncollected


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_no_collection_inside_and_the_collector_back_after() -> None:
    with uncollected:
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_stays_paused_until_the_last_thread_leaves() -> None:
    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with uncollected:
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait(10)
    with uncollected:
        pass
    assert not gc.isenabled()  # the other thread is still building its summary
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    with uncollected:
        pass
    assert not gc.isenabled()
