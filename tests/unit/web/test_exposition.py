"""``/metrics``'s writer gives prometheus_client's bytes, and a large render is kept and
refreshed in the background while scrapes answer the last one."""

from __future__ import annotations

import threading
import time

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry, generate_latest

from jobhost.envelope.reporting import configure_telemetry
from jobhost.web.endpoints import CHEAP_RENDER, PATIENCE, ExpositionCache, exposition
from tests.waiting import wait_for


def test_the_exposition_is_prometheus_clients_byte_for_byte() -> None:
    registry = CollectorRegistry(auto_describe=True)
    telemetry = configure_telemetry(
        extra_readers=[PrometheusMetricReader(registry=registry)], job_label=True
    )
    for index, name in enumerate(["sample.a", 'odd "quoted" \\ job\nname', "sample.ünï"]):
        telemetry.runs.add(1 + index, {"job": name, "outcome": "succeeded"})
        telemetry.runs.add(1, {"job": name, "outcome": "failed"})
        telemetry.duration.record(0.5 * index, {"job": name})
        telemetry.lag.record(75.0, {"job": name})
    telemetry.sink_failures.add(2, {"sink": "audit-file"})
    expected = generate_latest(registry)
    assert b'job="odd \\"quoted\\" \\\\ job\\nname"' in expected
    assert exposition(registry) == expected
    telemetry.shutdown()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_cheap_render_is_made_for_every_scrape() -> None:
    clock = Clock()
    bodies = iter([b"one", b"two"])
    cache = ExpositionCache(lambda: next(bodies), seconds=5, monotonic=clock)
    assert (cache(), cache()) == (b"one", b"two")


def test_a_slow_render_is_kept_and_made_again_off_the_scrape() -> None:
    clock = Clock()
    made: list[int] = []
    gate = threading.Event()

    def render() -> bytes:
        if made:  # the refresh, on its own thread: waits until the test lets it finish
            assert gate.wait(30)
        made.append(1)
        clock.now += CHEAP_RENDER * 4  # a render that takes long
        return f"render {len(made)}".encode()

    cache = ExpositionCache(render, seconds=5, monotonic=clock)
    assert cache() == b"render 1"
    clock.now += 1
    assert cache() == b"render 1"  # fresh: kept
    clock.now += 10
    assert cache() == b"render 1"  # stale: answered at once, the next one renders behind it
    assert cache() == b"render 1"  # one refresh at a time
    gate.set()
    wait_for(lambda: cache() == b"render 2", 30, "the background render")
    assert cache() == b"render 2"
    assert len(made) == 2


def test_a_render_held_up_leaves_the_scrape_the_last_exposition() -> None:
    gate = threading.Event()
    calls: list[str] = []

    def render() -> bytes:
        calls.append("render")
        if len(calls) == 2:  # held up, as by a gauge's read of a hung store
            assert gate.wait(30)
        return f"render {len(calls)}".encode()

    cache = ExpositionCache(render, seconds=5)
    assert cache() == b"render 1"
    began = time.monotonic()
    assert cache() == b"render 1"  # the second render does not come back in time
    assert PATIENCE - 0.1 < time.monotonic() - began < PATIENCE + 2
    gate.set()
    wait_for(lambda: cache() == b"render 2", 30, "the held-up render")
    assert cache() == b"render 2"  # slow, it is kept as a slow render is
    assert len(calls) == 2


def test_a_failing_render_leaves_the_scrape_the_last_exposition() -> None:
    calls: list[str] = []

    def render() -> bytes:
        calls.append("render")
        if len(calls) == 2:
            raise RuntimeError("the store went away")
        return f"render {len(calls)}".encode()

    cache = ExpositionCache(render, seconds=5)
    assert cache() == b"render 1"
    assert cache() == b"render 1"
    assert cache() == b"render 3"
