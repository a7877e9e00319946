"""A concurrency group across real replicas, on both stores: the jobs' own log is the witness.

Eight jobs share a group of two; each works 1.5s and comes due every second, so the group is
always full. Three ``jobhost run`` processes fire them. The executors write when they start and
end, with the machine's clock, to one file: at no instant may more than two be inside their
work. After 12 seconds the replica holding slots is killed with SIGKILL: its runs stop, their
leases expire, and the survivors take the slots. Over the whole 36 seconds (six fair turns of
each job) every job keeps getting its turn.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobhost.store import create_store_engine, upgrade
from tests.process.conftest import HostProcess, ledger
from tests.support import SAMPLE_PLUGIN
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

_JOBS = [f"sample.warehouse-{i}" for i in range(8)]
_LIMIT = 2
_LEASE = 3.0
_BEFORE_KILL = 12.0
_AFTER_KILL = 24.0


@pytest.fixture
def replicas(store_url: str, tmp_path: Path) -> Iterator[list[HostProcess]]:
    config = tmp_path / "jobhost.toml"
    lines = [
        f'database_url = "{store_url}"',
        f'plugins = ["{SAMPLE_PLUGIN}"]',
        'heartbeat_interval = "1s"',
        f'lease_duration = "{_LEASE:g}s"',
        'poll_interval = "1s"',
        "[concurrency_limits]",
        f"warehouse = {_LIMIT}",
        "[modules.sample]",
        f'log = "{tmp_path / "runs.log"}"',
    ]
    for name in _JOBS:
        lines += [
            "[[modules.sample.jobs]]",
            f'name = "{name}"',
            'interval = "1s"',
            'behaviour = "sleep"',
            "seconds = 1.5",
            "span_log = true",
            'concurrency_group = "warehouse"',
        ]
    config.write_text("\n".join(lines) + "\n")
    engine = create_store_engine(store_url)
    upgrade(engine)
    engine.dispose()
    started = [
        HostProcess(
            f"replica-{i}",
            config,
            tmp_path / f"replica-{i}.log",
            {**os.environ, "JOBHOST_LOAD_PLUGINS": "", "JOBHOST_HOST_ID": f"replica-{i}"},
        )
        for i in range(3)
    ]
    yield started
    for host in started:
        host.stop()


def test_eight_jobs_in_a_group_of_two_across_three_replicas(
    replicas: list[HostProcess], store_url: str, tmp_path: Path
) -> None:
    engine = create_store_engine(store_url)
    try:
        spans = tmp_path / "runs.log.spans"
        wait_for(spans.exists, 60, "the first run of the group")
        begun = time.time()
        # An observation window, not a wait: no more than two of the group may run at once
        # at any moment of it, so the test watches it whole.
        time.sleep(_BEFORE_KILL)
        holding = wait_for(
            lambda: {r.host_id for r in ledger(engine) if r.outcome == "running"},
            10,
            "a replica holding a slot",
        )
        victim = next(r for r in replicas if r.host_id in holding)
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        killed_at = time.time()
        time.sleep(_AFTER_KILL)  # the window after the kill: its slots must come back
        for replica in replicas:
            if replica is not victim:
                replica.signal(signal.SIGTERM)
        for replica in replicas:
            if replica is not victim:
                assert replica.wait(30) == 0, replica.log()
        rows = ledger(engine)
    finally:
        engine.dispose()

    starts, ends = _spans(spans)
    # A run killed with its host ends when its process died.
    intervals = [(at, ends.get(run, killed_at), job) for run, (at, job) in starts.items()]
    assert _most_at_once(intervals) <= _LIMIT
    assert _most_at_once(intervals) == _LIMIT, "the group was never full: the test shows nothing"

    victims = [r for r in rows if r.host_id == victim.host_id and r.outcome == "abandoned"]
    assert victims, "the killed replica held no slot"
    after = sorted(at for at, _end, _job in intervals if at > killed_at)
    assert after, "no run of the group started after the kill"
    # The dead replica's slots came back within its lease, a recheck and a turn or two.
    assert after[0] - killed_at < _LEASE + 4

    # No job starves: each one ran again and again, and never waited long for its turn.
    window = [(at, job) for at, _end, job in intervals if at >= begun]
    per_job: dict[str, list[float]] = defaultdict(list)
    for at, job in sorted(window):
        per_job[job].append(at)
    assert set(per_job) == set(_JOBS)
    runs = _BEFORE_KILL + _AFTER_KILL
    for job, times in per_job.items():
        gaps = [b - a for a, b in zip([begun, *times], [*times, begun + runs], strict=True)]
        assert len(times) >= 3, f"{job} ran only {len(times)} times"
        # Eight jobs share two slots of 1.5s: a fair turn comes every 6s; allow the kill's
        # lease and a margin.
        assert max(gaps) < 6 * 2 + _LEASE, f"{job} waited {max(gaps):.1f}s for a turn"


def _spans(path: Path) -> tuple[dict[str, tuple[float, str]], dict[str, float]]:
    starts: dict[str, tuple[float, str]] = {}
    ends: dict[str, float] = {}
    for line in path.read_text().splitlines():
        event, at, job, run = line.split()
        if event == "start":
            starts[run] = (float(at), job)
        else:
            ends[run] = float(at)
    return starts, ends


def _most_at_once(intervals: list[tuple[float, float, str]]) -> int:
    # Ends sort before starts at the same instant: a slot handed over is not two at once.
    events = sorted([(s, 1) for s, _e, _j in intervals] + [(e, -1) for _s, e, _j in intervals])
    most = current = 0
    for _at, step in events:
        current += step
        most = max(most, current)
    return most
