"""A fast restart of the PostgreSQL server under two live hosts: both fire again soon after
the server is back, a manual trigger is still picked up at once (the listener came back too),
nothing runs twice and nothing is left running.

The server restarted is one this test starts in a directory of its own (``initdb`` and
``pg_ctl``): the suite's shared server is never stopped.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord
from jobhost.store import create_store_engine, upgrade
from tests.commands import jobhost_command
from tests.ports import free_port
from tests.process.conftest import HostProcess, ledger
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Three second-level jobs that each hold a worker for most of their four seconds, on hosts of
# two workers: whichever host claims first has room for two, so both run at every occurrence,
# a run is in flight when the server goes, and one worker stays free for a trigger. Nothing
# else wakes a host for seconds (it beats every 5 s): a trigger started within 2 s of its
# request was woken by the host's listener, which has to come back with the server.
EVERY_FOUR: list[dict[str, Any]] = [
    {
        "name": f"sample.every-four-{i}",
        "cron": "*/4 * * * * *",
        "behaviour": "sleep",
        "seconds": 3.5,
    }
    for i in range(3)
]
BY_HAND: dict[str, Any] = {"name": "sample.by-hand", "cron": "0 3 * * *"}
FIRES_AGAIN_WITHIN = timedelta(seconds=15)
PICKED_UP_WITHIN = timedelta(seconds=2)
MS = timedelta(milliseconds=1)
HOSTS = {"replica-0", "replica-1"}


def _postgres_bin() -> Path:
    """The directory of ``initdb`` and ``pg_ctl``: ``pg_config --bindir``, else Debian's."""
    found = shutil.which("pg_config")
    candidates = []
    if found:
        done = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(done.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    # A failure, not a skip: a green run must have restarted a server.
    pytest.fail("initdb and pg_ctl are not installed: apt-get install postgresql")


class Server:
    """A PostgreSQL cluster of this test's own on a free loopback port, trust auth.

    Under root it runs as ``nobody`` (``initdb`` and ``postgres`` refuse root), in a
    directory that user owns; nothing of it is under pytest's ``tmp_path``, which only root
    can enter.
    """

    def __init__(self) -> None:
        self.bin = _postgres_bin()
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="jobhost-pgrestart-"))
        self.data = self.directory / "data"
        self.log_path = self.directory / "server.log"
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.directory, nobody.pw_uid, nobody.pw_gid)
            self._user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        # fsync off: the test is about connections, not durability, and shares two cores.
        self._options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} -c fsync=off "
            "-c full_page_writes=off -c max_connections=50"
        )

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        self._pg_ctl("start", "-o", self._options)

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast", "-o", self._options)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._pg_ctl("stop", "-m", "immediate")
            except (AssertionError, subprocess.TimeoutExpired):
                self._kill_postmaster()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "30", *args)

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin / program), *args],
            capture_output=True,
            text=True,
            cwd=self.directory,
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
            timeout=60,
            check=False,
            **self._user,
        )
        log = self.log_path.read_text() if self.log_path.exists() else ""
        assert done.returncode == 0, f"{program} {args}: {done.stdout}{done.stderr}{log}"

    def _kill_postmaster(self) -> None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


@pytest.fixture
def server() -> Iterator[Server]:
    """A server of this test's own, stopped and removed whatever happens."""
    made = Server()
    try:
        made.start()
        yield made
    finally:
        made.stop()


def test_a_fast_restart_of_the_server_keeps_both_hosts_firing_once(
    server: Server, tmp_path: Path
) -> None:
    engine = create_store_engine(server.url)
    upgrade(engine)
    config = _configure(tmp_path, server.url)
    replicas = [_host(tmp_path, config, host_id) for host_id in sorted(HOSTS)]

    def running() -> list[RunRecord]:
        return [r for r in ledger(engine) if r.outcome == "running"]

    try:
        wait_for(lambda: len({r.host_id for r in ledger(engine)}) == 2, 30, "both hosts to run")
        in_flight = wait_for(running, 10, "a run in flight", every=0.05)[0]
        began = time.monotonic()
        server.restart()
        back = datetime.now(UTC)
        restart_seconds = time.monotonic() - began
        engine.dispose()  # its pooled connections died with the server
        pickups = [_trigger(config, engine, replicas, 1)]

        def fired_since() -> dict[str | None, datetime]:
            first: dict[str | None, datetime] = {}
            for run in ledger(engine):
                if run.started_at and run.started_at >= back and run.job_name != BY_HAND["name"]:
                    first.setdefault(run.host_id, run.started_at)
            return first if len(first) == 2 else {}

        fired = wait_for(fired_since, FIRES_AGAIN_WITHIN.total_seconds(), "both to fire again")
        again = {host: (at - back).total_seconds() for host, at in fired.items()}
        pickups += [_trigger(config, engine, replicas, n) for n in range(2, 4)]
        stopping = time.monotonic()
        for replica in replicas:
            replica.signal(signal.SIGTERM)
        for replica in replicas:
            assert replica.wait(30) == 0, replica.log()
        stop_seconds = time.monotonic() - stopping
        rows = ledger(engine)
        print(
            f"restart took {restart_seconds:.2f}s; fired again after "
            f"{', '.join(f'{h} {s:.2f}s' for h, s in sorted(again.items()))}; triggers "
            f"picked up in {', '.join(f'{p / MS:.0f}' for p in pickups)} ms; "
            f"{len(rows)} runs; stopped in {stop_seconds:.2f}s; "
            f"{time.monotonic() - began:.1f}s from the restart"
        )
        assert max(pickups) < PICKED_UP_WITHIN, pickups
        succeeded = Counter(
            (r.job_name, r.occurrence) for r in rows if r.occurrence and r.outcome == "succeeded"
        )
        assert max(succeeded.values()) == 1, "an occurrence succeeded twice"
        assert running() == [], "a run stayed running"
        (settled,) = [r for r in rows if r.id == in_flight.id]
        assert settled.outcome == "succeeded", settled
        # Both hosts kept working after the restart, not one alone.
        assert {r.host_id for r in rows if r.started_at and r.started_at >= back} == HOSTS
    finally:
        for replica in replicas:
            replica.stop()
        engine.dispose()


def _trigger(config: Path, engine: Engine, hosts: list[HostProcess], count: int) -> timedelta:
    """Trigger the by-hand job (its ``count``-th run) and return how long that run waited."""
    done = _jobhost(config, "trigger", BY_HAND["name"], "--json")
    assert done.returncode == 0, done.stderr + "".join(h.log() for h in hosts)

    def started() -> list[RunRecord]:
        runs = [r for r in ledger(engine) if r.job_name == BY_HAND["name"] and r.started_at]
        return runs if len(runs) == count else []

    runs: list[RunRecord] = wait_for(started, 10, f"triggered run {count} to start")
    run = max(runs, key=lambda r: r.queued_at)
    assert run.started_at is not None
    return run.started_at - run.queued_at


def _configure(directory: Path, url: str) -> Path:
    config = directory / "jobhost.toml"
    lines = [f"database_url = {toml_value(url)}", f"plugins = {toml_value([SAMPLE_PLUGIN])}"]
    lines += ["auto_migrate = false", 'worker_pool_size = "2"', "[modules.sample]"]
    lines.append(f"log = {toml_value(str(directory / 'runs.log'))}")
    for job in [*EVERY_FOUR, BY_HAND]:
        lines.append("[[modules.sample.jobs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_LOAD_PLUGINS"] = ""
    return env


def _jobhost(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return jobhost_command(["--config", str(config), *args], env=_environment(), timeout=60)


def _host(directory: Path, config: Path, host_id: str) -> HostProcess:
    env = {**_environment(), "JOBHOST_HOST_ID": host_id}
    return HostProcess(host_id, config, directory / f"{host_id}.log", env)
