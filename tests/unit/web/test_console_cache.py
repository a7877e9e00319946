"""The dashboard's few seconds of memory: a slow read is kept longer, so reading costs at most
a tenth of a CPU however many people look."""

from __future__ import annotations

from jobhost.web.console.cache import ShortCache


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
