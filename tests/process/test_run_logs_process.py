"""Run logs with a real ``jobhost run``, on both stores: ``jobhost logs --follow`` streams a run's
lines and ends with it; a host killed mid-run (SIGKILL) leaves the lines it had written; with
``log_format = "json"`` every line the host writes is a JSON object carrying the run's ids."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobhost.operations.runs import read_run_log
from jobhost.records import LogLine
from jobhost.store import Store
from tests.cli.operator_support import Operator
from tests.process.conftest import HostProcess
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def start_host(operator: Operator, tmp_path: Path) -> Iterator[Any]:
    started: list[HostProcess] = []

    def start() -> HostProcess:
        env = operator.env(JOBHOST_HOST_ID="logs-1")
        started.append(HostProcess("logs-1", operator.config, tmp_path / "host.log", env))
        return started[-1]

    yield start
    for host in started:
        host.stop()


def _running_run(operator: Operator, job: str) -> str:
    def found() -> str | None:
        running = [run.id for run in operator.runs(job) if run.outcome == "running"]
        return running[0] if running else None

    return str(wait_for(found, 180, f"a running run of {job}"))


def _lines(operator: Operator, run_id: str) -> list[LogLine]:
    page = read_run_log(Store(operator.engine), run_id)
    assert page is not None
    return [entry for entry in page.entries if isinstance(entry, LogLine)]


def test_follow_streams_the_lines_in_order_and_ends_when_the_run_ends(
    operator: Operator, start_host: Any
) -> None:
    job = {
        "name": "sample.chatty",
        "cron": "0 3 * * *",
        "behaviour": "log",
        "lines": 60,
        "pause": 0.2,
    }
    operator.configure([job], poll_interval="1s", heartbeat_interval="1s")
    start_host()
    assert operator.jobhost("trigger", "sample.chatty", "--no-wait").returncode == 0
    run_id = _running_run(operator, "sample.chatty")
    follow = subprocess.run(
        [sys.executable, "-m", "jobhost", "--config", str(operator.config), "logs", run_id, "-f"],
        env=operator.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert follow.returncode == 0, follow.stderr
    printed = [line.split(maxsplit=2)[2] for line in follow.stdout.splitlines()]
    assert printed == [f"line {i}" for i in range(1, 61)]
    assert f"run {run_id} (sample.chatty) ended: succeeded" in follow.stderr
    # It ended because the run did: the ledger says so.
    _, body = operator.json("history", "sample.chatty")
    assert body["runs"][0]["outcome"] == "succeeded"


def test_a_host_killed_mid_run_leaves_the_lines_it_had_written(
    operator: Operator, start_host: Any
) -> None:
    job = {
        "name": "sample.endless",
        "cron": "0 3 * * *",
        "behaviour": "log",
        "lines": 100_000,
        "pause": 0.02,
    }
    operator.configure([job], poll_interval="1s", heartbeat_interval="1s", log_format="json")
    host = start_host()
    assert operator.jobhost("trigger", "sample.endless", "--no-wait").returncode == 0
    run_id = _running_run(operator, "sample.endless")
    wait_for(lambda: len(_lines(operator, run_id)) >= 20, 180, "20 lines in the store")
    host.process.kill()
    host.wait(10)
    kept = _lines(operator, run_id)
    assert [line.seq for line in kept] == list(range(1, len(kept) + 1))
    assert [line.message for line in kept] == [f"line {i}" for i in range(1, len(kept) + 1)]
    shown = operator.jobhost("logs", run_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].endswith("INFO     line 1")

    # Every line the JSON host wrote parses; the job's own carry the run's ids.
    objects = [json.loads(line) for line in host.log().splitlines() if line.strip()]
    assert objects, "the host wrote nothing"
    assert all({"time", "level", "logger", "message"} <= set(o) for o in objects)
    assert all(o["time"].endswith("Z") for o in objects)
    from_job = [o for o in objects if o["logger"] == "jobhost.job.sample.endless"]
    assert from_job[0]["message"] == "line 1"
    for entry in from_job:
        assert entry["job"] == "sample.endless"
        assert entry["run_id"] == run_id
        assert entry["attempt"] == 1
        assert len(entry["trace_id"]) == 32 and int(entry["trace_id"], 16)
        assert len(entry["span_id"]) == 16 and int(entry["span_id"], 16)
    assert not any("run_id" in o for o in objects if o["logger"] == "jobhost.host")
