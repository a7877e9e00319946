"""``python -m jobhost.demo DIR``: what it makes, that both modules accept it, and that the
first cleanup does what the summary promises."""

from __future__ import annotations

import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from jobhost_contracts import Cancellation, JobContext, TriggerSource
from jobhost_files.plugin import jobhost_jobs as files_jobs
from jobhost_files.walk import QUARANTINE_DIR
from jobhost_http.call import CallFailed
from jobhost_http.plugin import jobhost_jobs as http_jobs
from returns.result import Failure

from jobhost.config import load_settings
from jobhost.demo import (
    ESCAPE_LINK,
    ORPHANS,
    REFERENCED,
    YOUNG_ORPHAN,
    make_demo,
)
from tests.waiting import wait_for


class _MemoryState:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def record(self, idempotency_key: str) -> bool:
        return True

    def seen(self, idempotency_key: str) -> bool:
        return False


def context(job: str) -> JobContext:
    return JobContext(
        job_name=job,
        run_id="run-1",
        occurrence=None,
        attempt=1,
        source=TriggerSource.MANUAL,
        idempotency_key=f"{job}:manual:run-1",
        fencing_token=1,
        config={},
        logger=logging.getLogger(f"jobhost.job.{job}"),
        cancellation=Cancellation(),
        state=_MemoryState(),
    )


def test_the_demo_configures_both_modules(tmp_path: Path) -> None:
    layout = make_demo(tmp_path / "demo")

    settings = load_settings(layout.config)
    assert settings.database_url == f"sqlite:///{layout.store_db}"
    assert settings.poll_interval == timedelta(seconds=5)
    [(cleanup, _)] = files_jobs(settings=settings.modules)
    assert (cleanup.name, cleanup.cron, cleanup.enabled) == (
        "files.orphan-cleanup",
        "* * * * *",
        True,
    )
    [(ping, _)] = http_jobs(settings=settings.modules)
    assert (ping.name, ping.interval, ping.retry.max_attempts, ping.retry.backoff) == (
        "http.demo-ping",
        timedelta(seconds=20),
        2,
        timedelta(seconds=5),
    )
    files = settings.modules["files"]
    assert (files["min_age"], files["mode"]) == ("1h", "quarantine")


def test_the_first_cleanup_does_what_the_summary_says(tmp_path: Path) -> None:
    layout = make_demo(tmp_path / "demo")
    section = tomllib.loads(layout.config.read_text())["modules"]["files"]

    [(_, cleanup)] = files_jobs(settings={"files": section})
    report = cleanup.execute(context("files.orphan-cleanup"))

    counts = report.unwrap()
    assert counts.moved == len(ORPHANS) and counts.errors == 0
    assert counts.skipped == 2  # the link leading out, and the reference leading out
    day_folders = list((layout.root / QUARANTINE_DIR).iterdir())
    assert len(day_folders) == 1
    assert all((day_folders[0] / orphan).is_file() for orphan in ORPHANS)
    assert all((layout.root / path).is_file() for path in (*REFERENCED, YOUNG_ORPHAN))
    assert (layout.root / ESCAPE_LINK).is_symlink()
    assert (layout.root / ESCAPE_LINK).resolve().is_file()


def test_the_ping_fails_visibly(tmp_path: Path) -> None:
    layout = make_demo(tmp_path / "demo")
    section = tomllib.loads(layout.config.read_text())["modules"]
    [(ping, executor)] = http_jobs(settings=section)

    result = executor.execute(context(ping.name))

    assert isinstance(result, Failure) and isinstance(result.failure(), CallFailed)


def test_running_it_again_refreshes_ages_and_keeps_the_store(tmp_path: Path) -> None:
    first = make_demo(tmp_path / "demo", now=time.time() - 86400)
    first.store_db.write_bytes(b"the store, with its history")
    quarantined = first.root / QUARANTINE_DIR / "2026-11-30" / ORPHANS[0]
    quarantined.parent.mkdir(parents=True)
    (first.root / ORPHANS[0]).rename(quarantined)

    again = make_demo(tmp_path / "demo")

    assert again == first
    assert again.store_db.read_bytes() == b"the store, with its history"
    assert quarantined.is_file() and (again.root / ORPHANS[0]).is_file()
    assert time.time() - os.lstat(again.root / YOUNG_ORPHAN).st_mtime < 60
    assert time.time() - os.lstat(again.root / ORPHANS[1]).st_mtime > 1.9 * 86400
    with sqlite3.connect(again.app_db) as connection:
        count = connection.execute("SELECT count(*) FROM file_references").fetchone()[0]
    connection.close()
    assert count == len(REFERENCED) + 1


def test_the_command_prints_what_it_made(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobhost.demo", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert "files.orphan-cleanup" in done.stdout and "http.demo-ping" in done.stdout
    assert (tmp_path / "demo" / "jobhost.toml").is_file()
    usage = subprocess.run(
        [sys.executable, "-m", "jobhost.demo"], capture_output=True, text=True, check=False
    )
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_the_demo_serves_on_loopback_and_says_where(tmp_path: Path) -> None:
    layout = make_demo(tmp_path / "demo")
    assert load_settings(layout.config).http_listen == layout.address
    assert layout.address.startswith("127.0.0.1:")
    summary = _summary_of(tmp_path / "demo")
    address = load_settings(layout.config).http_listen
    assert f"http://{address}/metrics" in summary and f"http://{address}/" in summary


@pytest.mark.slow
def test_the_demo_host_serves_the_dashboard_and_the_gauges(tmp_path: Path) -> None:
    layout = make_demo(tmp_path / "demo")
    base = f"http://{layout.address}"
    host = subprocess.Popen(
        [sys.executable, "-m", "jobhost", "--config", str(layout.config), "run"],
        cwd=layout.directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def gauges() -> str | None:
            try:
                with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                return None  # not listening yet
            return text if "jobhost_live_hosts" in text else None

        metrics: str = wait_for(gauges, 60, "the demo host's gauges", every=0.2)
        assert re.search(r"^jobhost_live_hosts\{[^}]*\} 1\.0$", metrics, re.MULTILINE), metrics
        assert 'jobhost_jobs{otel_scope_name="jobhost"' in metrics
        with urllib.request.urlopen(f"{base}/", timeout=10) as response:
            assert response.status == 200
            assert "text/html" in response.headers["Content-Type"]
    finally:
        host.send_signal(signal.SIGTERM)
        _, errors = host.communicate(timeout=60)
    assert f"serving HTTP on {layout.address}" in errors


def _summary_of(directory: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jobhost.demo", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout
