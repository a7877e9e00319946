"""A job that writes credentials to its log and its error: none of them reaches ``jobhost logs``,
the API's run log, the dashboard's run page, the history, the host's log or its audit line, and
the lines around them are kept.

The job runs through ``jobhost trigger`` in a real process (the same envelope and logging a host
uses); the API and the dashboard are then served in-process over the same store file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jobhost.store import create_store_engine, upgrade
from tests.api.api_support import SECRETS, served_api
from tests.badinput.unruly_jobs import AWS_KEY, CREDENTIAL_LINES, DB_PASSWORD, STRIPE_KEY
from tests.commands import jobhost_command

UNRULY = str(Path(__file__).parent.parent / "badinput" / "unruly_jobs.py")
SECRET_VALUES = (STRIPE_KEY, DB_PASSWORD, AWS_KEY, STRIPE_KEY[8:], AWS_KEY[4:])
KEPT = (
    "before the call",
    "calling the API with Authorization: Bearer ***",
    "connecting to host=db user=app password=*** dbname=app",
    "uploading with AKIA*** to the bucket",
    "after the call",
)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("credentials")
    url = f"sqlite:///{directory}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    lines = [
        f'database_url = "{url}"',
        f'plugins = ["{UNRULY}"]',
        'log_level = "INFO"',
        "[[modules.unruly.jobs]]",
        'name = "unruly.log-credentials"',
        'behaviour = "log-credentials"',
    ]
    path = directory / "jobhost.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobhost(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    return jobhost_command(
        ["--config", str(config), *args], env={**env, "JOBHOST_LOAD_PLUGINS": ""}, timeout=120
    )


def _clean(surface: str, text: str) -> None:
    leaked = [value for value in SECRET_VALUES if value in text]
    assert not leaked, f"{surface} shows {leaked}: {text[:2000]}"


def test_no_surface_shows_a_credential_a_job_logged_and_the_lines_around_them_stay(
    config: Path,
) -> None:
    assert CREDENTIAL_LINES[0] == KEPT[0]
    done = _jobhost(config, "trigger", "unruly.log-credentials", "--json")
    assert done.returncode == 1, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    # The host's log: the job's lines as they were logged, the failure, and the audit line.
    _clean("the host's log", done.stdout + done.stderr)
    for line in KEPT:
        assert line in done.stderr, done.stderr

    logs = _jobhost(config, "logs", run_id)
    assert logs.returncode == 0, logs.stderr
    _clean("jobhost logs", logs.stdout)
    shown = [line.split(" ", 2)[2].strip() for line in logs.stdout.splitlines()]
    assert shown == list(KEPT), logs.stdout

    history = _jobhost(config, "history", "unruly.log-credentials", "--json")
    _clean("jobhost history", history.stdout)
    (row,) = json.loads(history.stdout)["runs"]
    assert row["error"] == "refused: Authorization: Bearer *** password=*** AKIA***"

    store_url = config.read_text().splitlines()[0].split('"')[1]
    with served_api(store_url, console=True, plugins="") as (base, _engine):
        request = urllib.request.Request(
            f"{base}/api/v1/runs/{run_id}/logs",
            headers={"Authorization": f"Bearer {SECRETS['reader'][0]}"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            api = answer.read().decode()
        _clean("the API", api)
        assert "password=*** dbname=app" in api
        with urllib.request.urlopen(f"{base}/runs/{run_id}", timeout=30) as answer:
            page = answer.read().decode()
        _clean("the run page", page)
        assert "uploading with AKIA*** to the bucket" in page


@pytest.mark.slow
def test_a_host_writes_no_credential_to_its_log_or_its_audit_line(
    config: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_LOAD_PLUGINS"] = ""
    env["JOBHOST_HOST_ID"] = "redacting-host"
    log = tmp_path / "host.log"
    with log.open("w") as stderr:
        host = subprocess.Popen(
            [sys.executable, "-m", "jobhost", "--config", str(config), "run"],
            env=env,
            stdout=stderr,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while "redacting-host" not in _jobhost(config, "health").stdout + log.read_text():
            assert time.monotonic() < deadline and host.poll() is None, log.read_text()
            time.sleep(0.3)
        done = _jobhost(config, "trigger", "unruly.log-credentials", "--json")
        run_id = json.loads(done.stdout)["run_id"]
        while '"run.finished"' not in log.read_text() or run_id not in log.read_text():
            assert time.monotonic() < deadline and host.poll() is None, log.read_text()
            time.sleep(0.3)
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(60)
    text = log.read_text()
    _clean("the host's log", text)
    for line in KEPT:
        assert line in text, text
    (audit,) = [line for line in text.splitlines() if '"run.finished"' in line and run_id in line]
    assert "Bearer ***" in audit and "password=***" in audit, audit
