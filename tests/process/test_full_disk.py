"""A real ``jobhost run`` whose SQLite store's disk fills up: it backs off as it does when a
server goes away (a line when it starts, none while it lasts, a line when it ends) instead of
retrying at once, and fires again once there is space.

The disk is a small tmpfs mounted for the test (the suite runs as root), so the host's own
connection meets a real ``SQLITE_FULL``, at its ``COMMIT`` as in production.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobhost.store import create_store_engine, upgrade
from tests.process.conftest import HostProcess, ledger
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

JOBS: list[dict[str, Any]] = [
    {"name": f"sample.every-second-{i}", "cron": "* * * * * *"} for i in range(3)
]
FULL_FOR = 10.0
# Each part that meets the full disk says so once: the loop, the heartbeat, and the recorder
# when runs were finishing as it filled. An outage that retried every ~20 ms wrote hundreds.
AT_MOST_LINES = 3
"""While the disk is full: the outage's first line (and the heartbeat's, which says it too)."""


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 4 MB tmpfs of the test's own, unmounted whatever happens."""
    directory = Path(tempfile.mkdtemp(prefix="jobhost-full-disk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        directory.rmdir()
        # A failure, not a skip: a green run must have filled a disk under a host.
        pytest.fail(f"cannot mount a small tmpfs (the suite runs as root): {done.stderr}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)


def test_a_full_disk_backs_off_like_an_outage_and_fires_again_once_there_is_space(
    small_disk: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{small_disk / 'store.db'}"
    engine = create_store_engine(url)
    upgrade(engine)
    config = _configure(tmp_path, url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env.update(JOBHOST_LOAD_PLUGINS="", JOBHOST_HOST_ID="replica-0")
    host = HostProcess("replica-0", config, tmp_path / "replica-0.log", env)
    try:
        wait_for(lambda: len(ledger(engine)) >= 6, 30, "the host to fire")
        before = len(host.log().splitlines())
        _fill(small_disk / "filler")
        time.sleep(FULL_FOR)  # the assertion is about what did NOT happen for this long
        while_full = [
            line
            for line in host.log().splitlines()[before:]
            if "jobhost.audit" not in line  # runs that finished just before
        ]
        (small_disk / "filler").unlink()
        freed = datetime.now(UTC)
        again = wait_for(
            lambda: [r for r in ledger(engine) if r.started_at and r.started_at > freed],
            15,
            "the host to fire again once there is space",
        )
        fired_after = (min(r.started_at for r in again if r.started_at) - freed).total_seconds()
        host.signal(signal.SIGTERM)
        assert host.wait(30) == 0, host.log()
        print(
            f"{len(while_full)} lines in {FULL_FOR:.0f}s of a full disk; fired again after "
            f"{fired_after:.2f}s: {while_full}"
        )
        assert len(while_full) <= AT_MOST_LINES, while_full
        assert not [line for line in while_full if " ERROR " in line or "Traceback" in line]
        assert any("store unreachable" in line for line in while_full), while_full
        assert "store reachable again" in host.log()
        assert [r for r in ledger(engine) if r.outcome == "running"] == []
    finally:
        host.stop()
        engine.dispose()


def _fill(path: Path) -> None:
    """Write ``path`` until the disk has no room left."""
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as filler:
        while True:
            try:
                filler.write(chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]


def _configure(directory: Path, url: str) -> Path:
    config = directory / "jobhost.toml"
    lines = [f"database_url = {toml_value(url)}", f"plugins = {toml_value([SAMPLE_PLUGIN])}"]
    lines += ["auto_migrate = false", "[modules.sample]"]
    lines.append(f"log = {toml_value(str(directory / 'runs.log'))}")
    for job in JOBS:
        lines.append("[[modules.sample.jobs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
    config.write_text("\n".join(lines) + "\n")
    return config
