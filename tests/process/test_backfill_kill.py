"""A 300-occurrence backfill beside a job firing every 2 s, its host killed twice with ``kill -9``.

One real ``jobhost run`` host at a time. The job (overlap ``forbid``, ``max_attempts = 2``)
fires every 2 s and has run a few occurrences on schedule when ``jobhost backfill --mode all
--concurrency 2 --no-wait`` replays the 300 occurrences of the last ten minutes, so its newest
occurrences have an attempt before the backfill (``attempt_base`` 1). The host is killed while a
backfill run runs: once mid-way, replaced by a host under a new id (the dead host's runs are
abandoned when their leases expire), and once on an occurrence that had a scheduled attempt,
restarted under the same id (its runs are abandoned at start). The ledger then shows: no
scheduled occurrence skipped for overlap with the backfill's runs (only, if at all, with the
job's own late run after a restart), two backfill runs at a time and never three, each
occurrence succeeded exactly once in the backfill, and a killed occurrence retried within its
own budget of two attempts counted from its ``attempt_base``.
"""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord
from jobhost.store import reading
from jobhost.store.schema import backfills, runs
from tests.process.conftest import HostProcess, ledger, store_url
from tests.support import run_jobhost
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

JOB = "sample.pulse"
OCCURRENCES = 300
EVERY = timedelta(seconds=2)
MAX_ATTEMPTS = 2
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("store", STORES)
def test_a_backfill_killed_twice_beside_its_schedule_succeeds_each_occurrence_once(
    cluster: Any, tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    url = store_url(store, tmp_path, request)
    job = {
        "name": JOB,
        "cron": "*/2 * * * * *",
        "behaviour": "sleep",
        "seconds": 0.2,
        "overlap": "forbid",
        "max_attempts": MAX_ATTEMPTS,
        "retry_on": "failed,timed_out,abandoned",
        "backoff": "200ms",
        "jitter": 0,
    }
    settings = {"lease_duration": "3s", "heartbeat_interval": "1s", "poll_interval": "1s"}
    engine, (host,) = cluster([job], hosts=[{"JOBHOST_HOST_ID": "bf-a"}], store_url=url, **settings)
    wait_for(lambda: _scheduled_successes(engine) >= 4, 60, "four scheduled runs")
    end = _last_even_second(datetime.now(UTC))
    started = run_jobhost(
        "--config", str(tmp_path / "jobhost.toml"), "backfill", JOB,
        "--from", _iso(end - OCCURRENCES * EVERY), "--to", _iso(end), "--mode", "all",
        "--concurrency", "2", "--no-wait", "--reason", "replay",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    (backfill_id,) = started.stdout.split()
    began = time.monotonic()

    def replayed() -> list[RunRecord]:
        return [r for r in ledger(engine) if r.backfill_id == backfill_id]

    wait_for(
        lambda: sum(r.outcome == "succeeded" for r in replayed()) >= OCCURRENCES // 3,
        60,
        "a third of the backfill",
    )
    killed = [_kill_during(host, engine, lambda r: r.backfill_id == backfill_id)]
    # A new id: the dead host's runs are abandoned once their leases expire.
    (host,) = cluster(None, hosts=[{"JOBHOST_HOST_ID": "bf-b"}])[1]
    # An occurrence with a scheduled attempt before the backfill, near its end.
    killed.append(
        _kill_during(host, engine, lambda r: r.backfill_id == backfill_id and r.attempt_base >= 1)
    )
    # The same id: the new process abandons the dead one's runs as it starts.
    (host,) = cluster(None, hosts=[{"JOBHOST_HOST_ID": "bf-b"}])[1]
    wait_for(lambda: _state(engine, backfill_id) == "done", 90, "the backfill to finish")
    wall = time.monotonic() - began

    everything = ledger(engine)
    rows = [r for r in everything if r.backfill_id == backfill_id]
    own = [r for r in everything if r.backfill_id is None and r.job_name == JOB]
    # A scheduled occurrence is skipped for overlap only beside one of the job's own runs (a
    # restarted host's late catch-up run, say), never for the backfill's.
    overlapped = [r for r in own if r.outcome == "skipped" and "overlap" in (r.reason or "")]
    for skipped in overlapped:
        assert any(
            r.queued_at <= skipped.queued_at <= (r.finished_at or skipped.queued_at)
            for r in own
            if r.started_at is not None and r is not skipped
        ), f"{skipped.occurrence} skipped for overlap beside backfill runs only"
    assert sum(r.outcome == "succeeded" for r in own if r.started_at and r.started_at > end) >= 5

    succeeded = Counter(r.occurrence for r in rows if r.outcome == "succeeded")
    assert len(succeeded) == OCCURRENCES and set(succeeded.values()) == {1}
    assert max(_running_at_once(rows)) == 2, "a backfill at concurrency 2 never ran two at once"

    # Each occurrence's attempts count from the backfill's attempt_base: the attempts the
    # schedule made at it before the backfill.
    before: dict[datetime, int] = defaultdict(int)
    for r in own:
        if r.occurrence is not None:
            before[r.occurrence] = max(before[r.occurrence], r.attempt)
    assert sum(1 for r in rows if r.attempt_base) >= 3, "no occurrence had a scheduled attempt"
    by_occurrence: dict[datetime, list[RunRecord]] = defaultdict(list)
    for r in rows:
        assert r.occurrence is not None
        assert r.attempt_base == before[r.occurrence], r
        by_occurrence[r.occurrence].append(r)
    for occurrence, tries in by_occurrence.items():
        tries.sort(key=lambda r: r.attempt)
        base = tries[0].attempt_base
        assert [r.attempt for r in tries] == list(range(base + 1, base + len(tries) + 1))
        assert len(tries) <= MAX_ATTEMPTS, (occurrence, tries)
        assert [r.source for r in tries] == ["backfill"] + ["retry"] * (len(tries) - 1)
        assert [r.outcome for r in tries] == ["abandoned"] * (len(tries) - 1) + ["succeeded"]
    retried = {o for o, tries in by_occurrence.items() if len(tries) > 1}
    assert {r.occurrence for r in killed} <= retried
    assert max(r.attempt_base for r in killed) >= 1
    assert len(retried) <= 2 * len(killed)
    bases = sorted((str(o), by_occurrence[o][0].attempt_base) for o in retried)
    print(
        f"\n{store}: backfill of {OCCURRENCES} in {wall:.1f}s, {len(killed)} kills, "
        f"occurrences retried (occurrence, attempt_base): {bases}, {len(own)} scheduled rows, "
        f"{len(overlapped)} skipped for overlap with the job's own runs"
    )
    host.signal(signal.SIGTERM)
    assert host.wait(30) == 0, host.log()


def _kill_during(
    host: HostProcess,
    engine: Engine,
    which: Callable[[RunRecord], bool],
) -> RunRecord:
    """``kill -9`` the host while one of the backfill's runs that ``which`` picks runs and none
    of the job's scheduled runs does (a dead scheduled run would hold the job's lease and make
    the next host skip an occurrence for overlap, which is the schedule's own rule); that run.
    The run started under 0.1 s ago, so that its 0.2 s are not over when the kill lands."""

    def target() -> RunRecord | None:
        running = [r for r in _running(engine) if r.job_name == JOB]
        if any(r.backfill_id is None for r in running):
            return None
        fresh = datetime.now(UTC) - timedelta(seconds=0.1)
        return next(
            (r for r in running if which(r) and r.started_at and r.started_at > fresh), None
        )

    victim: RunRecord = wait_for(target, 60, "a backfill run to kill the host in", every=0.01)
    host.signal(signal.SIGKILL)
    host.wait(10)
    return victim


def _running_at_once(rows: list[RunRecord]) -> list[int]:
    """How many of ``rows`` ran at once after each start (from started_at to finished_at)."""
    events = sorted(
        [(r.started_at, 1) for r in rows if r.started_at]
        + [(r.finished_at, -1) for r in rows if r.started_at and r.finished_at]
    )  # an end before a start at the same instant
    counts, now = [], 0
    for _, step in events:
        now += step
        counts.append(now)
    return counts


def _scheduled_successes(engine: Engine) -> int:
    return sum(1 for r in ledger(engine) if r.source == "schedule" and r.outcome == "succeeded")


def _running(engine: Engine) -> list[RunRecord]:
    with reading(engine) as connection:
        found = connection.execute(select(runs).where(runs.c.outcome == "running"))
        return [RunRecord.from_row(r) for r in found.mappings()]


def _state(engine: Engine, backfill_id: str) -> str:
    with reading(engine) as connection:
        query = select(backfills.c.state).where(backfills.c.id == backfill_id)
        return str(connection.execute(query).scalar_one())


def _last_even_second(now: datetime) -> datetime:
    second = now.replace(microsecond=0)
    return second - timedelta(seconds=second.second % 2)


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
