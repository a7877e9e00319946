"""Corrupt rows seen by the firing loop of a real ``jobhost run``: a bad row sets its job aside."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.operator_support import Operator
from tests.waiting import wait_for_value

pytestmark = [pytest.mark.slow]

_JOBS = [
    {"name": "sample.damaged", "cron": "* * * * * *"},
    {"name": "sample.healthy", "cron": "* * * * * *"},
]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Operator]:
    operator = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    operator.configure(_JOBS, heartbeat_interval="1s", poll_interval="1s")
    operator.sync()
    yield operator
    operator.close()


def _run_until(operator: Operator, job: str, seconds: float) -> bool:
    """Start a host and wait until ``job`` has a finished run; stop the host either way."""
    log = (operator.directory / "host.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jobhost", "--config", str(operator.config), "run"],
        env=operator.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def settled() -> bool | None:
            if any(r.outcome == "succeeded" for r in operator.runs(job)):
                return True
            return False if process.poll() is not None else None

        try:
            return wait_for_value(settled, seconds, f"a run of {job} to succeed", every=0.2)
        except AssertionError:
            return False
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def _log(operator: Operator) -> str:
    return Path(operator.directory / "host.log").read_text()


def test_a_non_numeric_fencing_token_in_one_schedule_row_does_not_stop_the_others(
    host: Operator,
) -> None:
    with host.engine.begin() as connection:
        connection.exec_driver_sql(
            "UPDATE schedules SET fencing_token = 'abc' WHERE job_name = 'sample.damaged'"
        )
    assert _run_until(host, "sample.healthy", 30), _log(host)
    assert "Traceback" not in _log(host)


def test_a_running_row_with_a_garbage_lease_does_not_block_its_job_for_ever(
    host: Operator,
) -> None:
    host.add_run("sample.damaged", "running", lease_expires_at=None)
    with host.engine.begin() as connection:
        connection.exec_driver_sql(
            "UPDATE runs SET lease_expires_at = 'garbage' WHERE job_name = 'sample.damaged'"
        )
    assert _run_until(host, "sample.damaged", 30), _log(host)
    assert "Traceback" not in _log(host)
