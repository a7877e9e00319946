"""The store refuses what would damage it or mislead: a newer schema, a read-only file, a clash.

Also: readers never wait behind a writer on SQLite, and ``pause`` wants a reason that says one.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from jobhost.store import head_revision
from tests.cli.operator_support import Operator
from tests.waiting import wait_for

JOB = {"name": "sample.hourly", "cron": "0 * * * *"}


def test_an_older_jobhost_on_a_newer_schema_refuses_with_exit_3(operator: Operator) -> None:
    operator.configure([JOB])
    with operator.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    for args in (
        ["report"],
        ["history", "sample.hourly"],
        ["trigger", "sample.hourly"],
        ["pause", "sample.hourly", "--reason", "x"],
        ["db", "upgrade"],
        ["db", "current"],
        ["plan"],
        ["run"],
    ):
        done = operator.jobhost(*args)
        assert done.returncode == 3, (args, done.stderr)
        newer = f"store schema 0099 is newer than this jobhost ({head_revision()}): upgrade jobhost"
        assert newer in done.stderr, args
        assert "Traceback" not in done.stderr and "db upgrade`" not in done.stderr, args
    health, result = operator.json("health", "--no-hosts")
    assert health.returncode == 1
    (store,) = [check for check in result["checks"] if check["name"] == "store"]
    assert store["detail"].startswith(
        f"store schema 0099 is newer than this jobhost ({head_revision()})"
    )


@pytest.fixture
def shared_directory() -> Iterator[Path]:
    # A directory another user can reach (pytest's tmp_path is private to its owner).
    made = Path(tempfile.mkdtemp(prefix="jobhost-ro-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _as_reader(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run as a user who may read the store but not write it (root may write anything)."""
    return subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        user="nobody" if os.geteuid() == 0 else None,
    )


def test_a_read_only_store_serves_report_and_history_and_run_refuses(
    shared_directory: Path,
) -> None:
    operator = Operator(f"sqlite:///{shared_directory}/store.db", shared_directory)
    try:
        operator.configure([JOB])
        operator.sync()
        operator.add_run("sample.hourly", "succeeded")
    finally:
        operator.close()
    store = shared_directory / "store.db"
    assert not Path(f"{store}-wal").exists(), "a clean close leaves no write-ahead log"
    os.chmod(operator.config, 0o644)
    if os.geteuid() != 0:
        store.chmod(0o444)
        shared_directory.chmod(0o555)
    try:
        env = operator.env()
        base = [sys.executable, "-m", "jobhost", "--config", str(operator.config)]
        for args in (["report"], ["history", "sample.hourly"], ["health", "--no-hosts"]):
            done = _as_reader([*base, *args], env)
            assert done.returncode in {0, 1}, (args, done.stderr)
            assert "Traceback" not in done.stderr
            assert "readonly" not in done.stderr and "cannot reach" not in done.stderr, args
        history = _as_reader([*base, "history", "sample.hourly"], env)
        assert "succeeded" in history.stdout
        for args in (
            ["run"],
            ["trigger", "sample.hourly"],
            ["pause", "sample.hourly", "--reason", "x"],
        ):
            done = _as_reader([*base, *args], env)
            assert done.returncode == 3, (args, done.stderr)
            assert f"the store file {store}" in done.stderr
            assert "is read-only for this user" in done.stderr
            assert "Traceback" not in done.stderr
    finally:
        shared_directory.chmod(0o755)


def test_readers_do_not_wait_behind_a_writer(sqlite_operator: Operator) -> None:
    sqlite_operator.configure([JOB])
    sqlite_operator.sync()
    path = sqlite_operator.url.removeprefix("sqlite:///")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # hold the write lock as a busy host would
    try:
        for args in (["report"], ["history", "sample.hourly"], ["db", "current"]):
            # Before, each waited the 30 s busy timeout and failed "database is locked".
            done = sqlite_operator.jobhost(*args, timeout=25)
            assert done.returncode == 0, (args, done.stderr)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("reason", ["", "   "])
def test_pause_wants_a_reason_that_says_something(sqlite_operator: Operator, reason: str) -> None:
    sqlite_operator.configure([JOB])
    sqlite_operator.sync()
    done = sqlite_operator.jobhost("pause", "sample.hourly", "--reason", reason)
    assert done.returncode == 2
    assert "--reason" in done.stderr and "must say why" in done.stderr
    schedule = sqlite_operator.schedule("sample.hourly")
    assert schedule is not None and not schedule.paused


def test_a_second_live_host_with_the_same_host_id_is_refused(sqlite_operator: Operator) -> None:
    sqlite_operator.configure([JOB], host_id="replica-a", heartbeat_interval="1s")
    first = subprocess.Popen(
        [sys.executable, "-m", "jobhost", "--config", str(sqlite_operator.config), "run"],
        env=sqlite_operator.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def registered() -> bool:
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            return "replica-a" in sqlite_operator.live_hosts()

        wait_for(registered, 60, "the first host to register", every=0.2)
        second = sqlite_operator.jobhost("run", timeout=60)
        assert second.returncode == 3, second.stderr
        assert "host_id 'replica-a' is in use by a live host" in second.stderr
        assert "give every replica its own host_id" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None, "the first host runs on"
    finally:
        first.terminate()
        first.wait(timeout=60)
        if first.stderr:
            first.stderr.close()
    # Stopped cleanly, the id is free again at once.
    again = subprocess.Popen(
        [sys.executable, "-m", "jobhost", "--config", str(sqlite_operator.config), "run"],
        env=sqlite_operator.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def back() -> bool:
            assert again.poll() is None, "a restart under the same id must be accepted"
            return "replica-a" in sqlite_operator.live_hosts()

        wait_for(back, 60, "the restarted host to register", every=0.2)
    finally:
        again.terminate()
        again.wait(timeout=60)
