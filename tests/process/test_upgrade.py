"""An upgrade across the latest schema change, with the previous release really running.

The previous release is the first parent of the newest commit that added a migration, checked
out from git and installed in a virtualenv of its own (kept in pytest's cache, by commit). A host
of it fires second-level jobs on a PostgreSQL store at its schema; this release's ``jobhost db
upgrade`` runs under it; then a host of this release starts beside it. No occurrence runs twice,
every second is accounted for, every run that started ends with an outcome, and the old host
does what running.md says it does.
"""

from __future__ import annotations

import fcntl
import io
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import venv
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, head_revision
from tests.commands import jobhost_command
from tests.process.conftest import HostProcess, ledger
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = "jobhost/store/migrations/versions"
# Revisions the release before them cannot work with (name each such new migration here): its
# running hosts stop with one line (exit 3) at their next turn. Against any other they work on.
NOT_ADDITIVE: frozenset[str] = frozenset()
JOBS: list[dict[str, Any]] = [
    {"name": "sample.steady", "cron": "* * * * * *"},
    # Always one in flight: the upgrade and the second host arrive while runs are open.
    {"name": "sample.slow", "cron": "* * * * * *", "behaviour": "sleep", "seconds": 2.5},
]


def test_an_upgrade_across_the_latest_schema_change_loses_no_run(
    request: pytest.FixtureRequest, postgres_url: str, tmp_path: Path
) -> None:
    old_python, old_tree = _previous_release(request)
    old_head, new_head = _newest_revision(old_tree / VERSIONS), head_revision()
    old_config = _config(
        tmp_path / "old.toml", postgres_url, old_tree / "tests/plugins/sample_jobs.py"
    )
    new_config = _config(tmp_path / "new.toml", postgres_url, Path(SAMPLE_PLUGIN))
    env = {**os.environ, "JOBHOST_LOAD_PLUGINS": ""}
    engine = create_store_engine(postgres_url)
    hosts: list[HostProcess] = []
    try:
        _ok(_old_command(old_python, old_config, ["db", "upgrade"], env))
        assert _revision(engine) == old_head
        old = _host(hosts, "old", old_python, old_config, tmp_path, env)
        wait_for(lambda: _succeeded(engine, "old") >= 3, 60, "the previous release to fire")

        # This release against the older schema, with auto_migrate = false: refuses to start.
        early = jobhost_command(["--config", str(new_config), "run"], env=env, timeout=60)
        assert early.returncode == 1, early.stderr
        assert f"is not at schema revision {new_head}; run `jobhost db upgrade`" in early.stderr

        _ok(jobhost_command(["--config", str(new_config), "db", "upgrade"], env=env, timeout=60))
        upgraded_at = datetime.now(UTC)
        assert _revision(engine) == new_head

        # The previous release, started against the newer schema: refuses in one line.
        late = _old_command(old_python, old_config, ["run"], {**env, "JOBHOST_HOST_ID": "old-2"})
        assert late.returncode == 3, late.stderr
        refusal = f"store schema {new_head} is newer than this jobhost ({old_head})"
        assert len([line for line in late.stderr.splitlines() if refusal in line]) == 1, late.stderr

        new = _host(hosts, "new", [sys.executable], new_config, tmp_path, env)
        if new_head in NOT_ADDITIVE:
            assert old.wait(30) == 3, old.log()
            stops = [line for line in old.log().splitlines() if "newer than this jobhost" in line]
            assert len(stops) == 1 and "this host stops" in stops[0], old.log()
            wait_for(lambda: _succeeded(engine, "new") >= 6, 60, "the new host to fire")
        else:
            wait_for(
                lambda: (
                    _succeeded(engine, "new") >= 6 and _succeeded(engine, "old", upgraded_at) >= 3
                ),
                60,
                "both releases to fire after the upgrade",
            )
            assert old.process.poll() is None, old.log()
            assert " ERROR " not in old.log(), old.log()
            old.signal(signal.SIGTERM)
            assert old.wait(30) == 0, old.log()
        new.signal(signal.SIGTERM)
        assert new.wait(30) == 0, new.log()
        rows = ledger(engine)
    finally:
        for host in hosts:
            host.stop()
        engine.dispose()

    for host in hosts:
        assert "Traceback" not in host.log(), host.log()
    started = [r for r in rows if r.started_at is not None]
    unfinished = [r for r in started if r.finished_at is None or r.outcome == "running"]
    assert unfinished == [], "a run that started has no outcome"
    assert {r.host_id for r in started} == {"old", "new"}
    for job in ("sample.steady", "sample.slow"):
        runs = Counter(r.occurrence for r in rows if r.job_name == job and r.attempt >= 1)
        assert set(runs.values()) == {1}, f"an occurrence of {job} ran twice"
    _every_second_accounted(rows, "sample.steady")


def _every_second_accounted(rows: list[Any], job: str) -> None:
    """Every second from the old host's first fire to shortly before the last is run or
    recorded with a reason."""
    mine = [r for r in rows if r.job_name == job and r.occurrence is not None]
    first = min(r.occurrence for r in mine if r.attempt >= 1)
    last = max(r.occurrence for r in mine) - timedelta(seconds=2)
    accounted = {r.occurrence for r in mine if r.attempt >= 1 or r.reason}
    expected = set(
        itertools.takewhile(
            lambda t: t <= last, (first + timedelta(seconds=i) for i in itertools.count())
        )
    )
    assert len(expected) >= 10
    missing = sorted(expected - accounted)
    assert missing == [], "\n".join(
        f"{r.occurrence:%H:%M:%S} {r.outcome} {r.host_id} {r.reason}" for r in mine
    )


def _previous_release(request: pytest.FixtureRequest) -> tuple[list[str], Path]:
    """(python command, source tree) of the release before the newest schema change, installed
    once per commit under pytest's cache. Its python runs isolated (``-I``), so that it imports
    its own jobhost, not this checkout's from the working directory."""
    commit = _previous_schema_commit()
    name, cache = f"jobhost-release-{commit[:12]}", getattr(request.config, "cache", None)
    if cache is None:  # -p no:cacheprovider: installed afresh on each run
        home = request.getfixturevalue("tmp_path_factory").mktemp(name)
    else:
        home = cache.mkdir(name)
    tree, environment = home / "tree", home / "venv"
    python, done = environment / "bin" / "python", home / "installed"
    with (home / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session building the same release
        if not done.exists():
            for partial in (tree, environment):
                shutil.rmtree(partial, ignore_errors=True)
            _extract(commit, tree)
            # This environment's pip installs there: no pip of its own to set up, and nothing
            # compiled ahead that the test never imports.
            venv.EnvBuilder(with_pip=False).create(environment)
            constraints = (
                ["-c", str(tree / "constraints.txt")] if (tree / "constraints.txt").exists() else []
            )
            pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
            pip += ["--no-compile", *constraints]
            _ok(
                subprocess.run(
                    [*pip, str(tree / "contracts"), str(tree)],
                    check=False,
                    capture_output=True,
                    text=True,
                )
            )
            done.write_text(commit)
    return [str(python), "-I"], tree


def _previous_schema_commit() -> str:
    """The first parent of the newest commit that added a migration; fails, never skips, when
    the history is not there to say."""
    shallow = _git("rev-parse", "--is-shallow-repository")
    assert shallow == "false", (
        "this test needs the repository's full history to find the previous release: "
        "run `git fetch --unshallow` (CI: checkout with fetch-depth: 0)"
    )
    added = _git("log", "-1", "--format=%H", "--diff-filter=A", "--", VERSIONS)
    assert added, f"no commit in this repository's history added a migration under {VERSIONS}"
    return _git("rev-parse", f"{added}^1")


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], check=False, capture_output=True, text=True
        )
    except FileNotFoundError:
        pytest.fail("this test needs git to check out the previous release")
    assert done.returncode == 0, f"git {' '.join(args)} failed in {ROOT}: {done.stderr.strip()}"
    return done.stdout.strip()


def _extract(commit: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def _newest_revision(versions: Path) -> str:
    return max(
        m.group(1) for p in versions.iterdir() if (m := re.fullmatch(r"(\d{4})_\w+\.py", p.name))
    )


def _config(path: Path, url: str, plugin: Path) -> Path:
    lines = [
        f'database_url = "{url}"',
        f'plugins = ["{plugin}"]',
        "auto_migrate = false",  # `jobhost db upgrade` moves the schema, and nothing else
        'heartbeat_interval = "1s"',
        "[modules.sample]",
    ]
    for job in JOBS:
        lines.append("[[modules.sample.jobs]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in job.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _host(
    hosts: list[HostProcess],
    host_id: str,
    python: Sequence[str],
    config: Path,
    logs: Path,
    env: dict[str, str],
) -> HostProcess:
    hosts.append(
        HostProcess(
            host_id,
            config,
            logs / f"{host_id}.log",
            {**env, "JOBHOST_HOST_ID": host_id},
            python=python,
        )
    )
    return hosts[-1]


def _old_command(
    python: Sequence[str], config: Path, argv: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*python, "-m", "jobhost", "--config", str(config), *argv],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"{done.args}: {done.stdout}{done.stderr}"


def _revision(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one())


def _succeeded(engine: Engine, host_id: str, since: datetime | None = None) -> int:
    """Succeeded steady runs of ``host_id``: read with plain SQL, which any schema answers."""
    with engine.connect() as connection:
        return int(
            connection.execute(
                text(
                    "SELECT count(*) FROM runs WHERE job_name = 'sample.steady' AND host_id = :host"
                    " AND outcome = 'succeeded' AND started_at > :since"
                ),
                {"host": host_id, "since": since or datetime(2000, 1, 1, tzinfo=UTC)},
            ).scalar_one()
        )
