"""The dashboard's few seconds of memory: a slow read is kept longer, so reading costs at most
a tenth of a CPU however many people look."""

from __future__ import annotations

import threading

from jobhost.web.console.views import ShortCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_dashboards_cache_keeps_a_slow_value_ten_times_as_long_as_it_took() -> None:
    clock = Clock()
    values = iter(range(10))

    def make() -> int:
        clock.now += 2.0  # a summary that takes two seconds to read
        return next(values)

    cache: ShortCache[int] = ShortCache(3, monotonic=clock)
    assert cache.get("summary", make) == 0
    clock.now += 19
    assert cache.get("summary", make) == 0
    clock.now += 1
    assert cache.get("summary", make) == 1
    quick: ShortCache[int] = ShortCache(3, monotonic=clock)
    assert quick.get("page", lambda: 5) == 5
    clock.now += 3
    assert quick.get("page", lambda: 6) == 6
    off: ShortCache[int] = ShortCache(0, monotonic=clock)
    assert (off.get("x", lambda: 1), off.get("x", lambda: 2)) == (1, 2)


def test_while_one_viewer_reads_again_the_others_get_the_stale_value_at_once() -> None:
    clock = Clock()
    reading = threading.Event()
    release = threading.Event()
    cache: ShortCache[str] = ShortCache(3, monotonic=clock)
    assert cache.get("summary", lambda: "old") == "old"
    clock.now += 60

    def slow() -> str:
        reading.set()
        assert release.wait(30)
        return "new"

    answers: list[str] = []
    reader = threading.Thread(target=lambda: answers.append(cache.get("summary", slow)))
    reader.start()
    assert reading.wait(30)
    assert cache.get("summary", lambda: "never made") == "old"
    release.set()
    reader.join(30)
    assert answers == ["new"]
    assert cache.get("summary", lambda: "never made") == "new"
    assert cache.made == 2
