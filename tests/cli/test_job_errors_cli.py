"""What a misbehaving executor leaves behind: a failed run with its cause, and no secret in the log.

Each job is run by ``jobhost trigger`` in a real process (no host alive: the job runs in that
process, through the same envelope and logging a host uses); the ledger is then read back with
``jobhost history --json``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobhost.store import create_store_engine, upgrade
from tests.badinput.unruly_jobs import BEHAVIOURS, HUGE
from tests.commands import jobhost_command

UNRULY = str(Path(__file__).parent.parent / "badinput" / "unruly_jobs.py")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("unruly")
    url = f"sqlite:///{directory}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    lines = [f'database_url = "{url}"', f'plugins = ["{UNRULY}"]']
    for behaviour in BEHAVIOURS:
        lines += ["[[modules.unruly.jobs]]", f'name = "unruly.{behaviour}"']
        lines.append(f'behaviour = "{behaviour}"')
    config = directory / "jobhost.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _jobhost(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    return jobhost_command(
        ["--config", str(config), *args], env={**env, "JOBHOST_LOAD_PLUGINS": ""}, timeout=120
    )


def _trigger(config: Path, behaviour: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    done = _jobhost(config, "trigger", f"unruly.{behaviour}")
    history = _jobhost(config, "history", f"unruly.{behaviour}", "--json")
    assert history.returncode == 0, history.stderr
    (row,) = json.loads(history.stdout)["runs"]
    return done, row


@pytest.mark.parametrize("behaviour", ["raise-secret", "fail-secret", "async-raise", "log-secret"])
def test_a_password_in_a_job_error_reaches_neither_the_log_nor_the_ledger(
    store: Path, behaviour: str
) -> None:
    done, row = _trigger(store, behaviour)
    output = done.stdout + done.stderr
    assert "S3cretPW" not in output
    assert "S3cretPW" not in json.dumps(row)
    if behaviour == "log-secret":
        assert "postgresql://app:***@db/app" in done.stderr
        return
    assert done.returncode == 1
    assert row["outcome"] == "failed"
    assert "postgresql://app:***@db/app" in row["error"]
    if behaviour != "fail-secret":
        # The log line and its traceback are there, redacted.
        assert "Traceback" in done.stderr and "postgresql://app:***@db/app" in done.stderr


@pytest.mark.parametrize(
    "behaviour,error_type,cause",
    [
        ("exit-3", "SystemExit", "SystemExit(3): the executor tried to end the process"),
        ("exit-none", "SystemExit", "SystemExit(): the executor tried to end the process"),
        ("exit-text", "SystemExit", "SystemExit('giving up')"),
        ("interrupt", "KeyboardInterrupt", "KeyboardInterrupt(): the executor tried to end"),
        ("base-exception", "_Custom", "_Custom('odd'): the executor raised a BaseException"),
    ],
)
def test_an_executor_that_tries_to_end_the_process_is_a_failed_run_with_its_cause(
    store: Path, behaviour: str, error_type: str, cause: str
) -> None:
    done, row = _trigger(store, behaviour)
    assert done.returncode == 1, done.stderr
    assert row["outcome"] == "failed"
    assert row["error_type"] == error_type
    assert cause in row["error"]
    assert "Lost" not in json.dumps(row)


@pytest.mark.parametrize("behaviour", ["huge-failure", "huge-raise"])
def test_a_huge_error_message_is_stored_cut_with_its_length_kept(
    store: Path, behaviour: str
) -> None:
    done, row = _trigger(store, behaviour)
    assert done.returncode == 1
    assert row["outcome"] == "failed"
    assert row["error"].endswith(f"... [cut: {HUGE} characters in all]")
    assert len(row["error"]) < 5000
    # The log is bounded too: every line of it.
    assert max(len(line) for line in done.stderr.splitlines()) < 5000


@pytest.mark.parametrize(
    "behaviour,expected",
    [("nul-failure", "before\\x00after"), ("surrogate-failure", "bad \\udcff byte")],
)
def test_characters_a_database_refuses_do_not_lose_the_outcome(
    store: Path, behaviour: str, expected: str
) -> None:
    done, row = _trigger(store, behaviour)
    assert done.returncode == 1
    assert row["outcome"] == "failed"
    assert row["error"] == expected
