"""``jobhost run`` started with exactly the environment compose gives a replica, pointed at the
local PostgreSQL: it answers 200 on every probe path the manifests use, and exits 0 on SIGTERM
within the stop grace period."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jobhost_contracts import parse_duration
from sqlalchemy.engine import make_url

from tests.deploy.recipes import (
    COMPOSE,
    SERVED_PATHS,
    compose_services,
    dockerfile_environment,
    jobhost_services,
    probe_paths,
    replica_services,
    run_jobhost,
    service_command,
    service_environment,
)
from tests.ports import free_port
from tests.waiting import wait_for

# -- the compose replica, for real ---------------------------------------------------------------


def _container_environment(
    service: Mapping[str, Any], postgres_url: str, tmp: Path
) -> dict[str, str]:
    """What the container of ``service`` gets, pointed at the test database and a free port."""
    env = {k: v for k, v in dockerfile_environment().items() if k != "PATH"}
    env.update(service_environment(service))
    declared = make_url(env["JOBHOST_DATABASE_URL"])
    local = make_url(postgres_url)
    assert declared.get_backend_name() == local.get_backend_name() == "postgresql"
    env["JOBHOST_DATABASE_URL"] = declared.set(
        host=local.host,
        port=local.port,
        username=local.username,
        password=local.password,
        database=local.database,
        query=local.query,
    ).render_as_string(hide_password=False)
    if "JOBHOST_CONFIG" in env:
        mounts = {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}
        copy = tmp / Path(env["JOBHOST_CONFIG"]).name
        copy.write_bytes((COMPOSE.parent / mounts[env["JOBHOST_CONFIG"]]).read_bytes())
        env["JOBHOST_CONFIG"] = str(copy)
    # The process's own basics: where programs are, nothing of the test runner's JOBHOST_*.
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    return env


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


@pytest.fixture
def compose_replica(
    postgres_url: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    services = compose_services()
    migrate = next(
        s for s in jobhost_services().values() if service_command(s)[1:] == ["db", "upgrade"]
    )
    name, replica = sorted(replica_services().items())[0]
    migrate_env = _container_environment(migrate, postgres_url, tmp_path)
    upgrade = run_jobhost(service_command(migrate)[1:], migrate_env, cwd=tmp_path)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr

    env = _container_environment(replica, postgres_url, tmp_path)
    host, _, _ = env["JOBHOST_HTTP_LISTEN"].rpartition(":")
    port = free_port()
    env["JOBHOST_HTTP_LISTEN"] = f"{host}:{port}"
    log = tmp_path / f"{name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "jobhost", *service_command(replica)[1:]],
            env=env,
            cwd=tmp_path,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    assert "postgres" in services
    try:
        yield process, f"http://127.0.0.1:{port}", log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_replica_started_as_compose_starts_it_answers_every_probe(
    compose_replica: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    process, base, log = compose_replica
    wanted = sorted(probe_paths() | {"/report"})
    statuses: dict[str, int] = {}

    def all_answer() -> bool:
        if process.poll() is not None:
            pytest.fail(f"jobhost run exited {process.returncode}:\n{log.read_text()}")
        statuses.update({path: _get(base + path)[0] for path in wanted})
        return all(status == 200 for status in statuses.values())

    wait_for(all_answer, 60, f"every probe to answer 200 ({wanted})", every=0.25)
    _, report = _get(base + "/report")
    assert "jobs" in json.loads(report)
    # The host's own list of what it serves is the one the static checks above rely on.
    status, missing = _get(base + "/no-such-endpoint")
    assert status == 404
    assert set(json.loads(missing)["endpoints"]) >= SERVED_PATHS
    # /metrics is Prometheus text; it may be empty before the first run has finished.
    _, metrics = _get(base + "/metrics")
    assert all(line.startswith("#") or " " in line for line in metrics.decode().splitlines())

    # SIGTERM, as the container runtime sends it: a clean exit 0 well within stop_grace_period.
    process.send_signal(signal.SIGTERM)
    _, replica = sorted(replica_services().items())[0]
    limit = parse_duration(replica["stop_grace_period"]).total_seconds()
    try:
        code = process.wait(limit)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"no exit within stop_grace_period ({limit}s) after SIGTERM:\n{log.read_text()}"
        )
    assert code == 0, log.read_text()
