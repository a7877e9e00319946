"""Real hosts behind a real PgBouncer in front of the test server: transaction pooling with
``store_pooling = "transaction"``, the default refusing a transaction pooler in one line, and
session pooling with the default (which says that the pooler dropped the store's options)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from jobhost.store import create_store_engine
from tests.commands import jobhost_command
from tests.conftest import postgres_base_url
from tests.ports import free_port
from tests.process.conftest import HostProcess, ledger
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# More jobs than one host has workers: each replica gets its share of every second.
EVERY_SECOND = [{"name": f"sample.every-second-{i:02d}", "cron": "* * * * * *"} for i in range(12)]
BY_HAND = {"name": "sample.by-hand", "cron": "0 3 * * *"}
FIRING_SECONDS = 12
PICKED_UP_WITHIN = timedelta(seconds=2)
PROBLEMS = ("ERROR", "Traceback", "unreachable")
TABLES_HERE = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"


class PgBouncer:
    """One PgBouncer process in front of the test server, its files in a directory of its own
    (readable by the unprivileged user it runs as when the tests run as root)."""

    def __init__(self, pool_mode: str, user: str, *, ignore_options: bool = True) -> None:
        if not Path(PGBOUNCER).exists():
            pytest.fail("pgbouncer is not installed: apt-get install pgbouncer (.ci/run does)")
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="jobhost-pgbouncer-"))
        self.directory.chmod(0o755)
        server = make_url(postgres_base_url())
        ignored = "extra_float_digits, options" if ignore_options else "extra_float_digits"
        self._write(
            "pgbouncer.ini",
            "[databases]\n"
            f"* = host={server.host or '127.0.0.1'} port={server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.directory / 'userlist.txt'}\n"
            f"pool_mode = {pool_mode}\nignore_startup_parameters = {ignored}\n"
            "default_pool_size = 20\nmax_client_conn = 200\n",
        )
        self._write("userlist.txt", f'"{user}" ""\n')
        command = [PGBOUNCER, str(self.directory / "pgbouncer.ini")]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            command[1:1] = ["-u", _unprivileged_user()]
        self.log_path = self.directory / "pgbouncer.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._listening, 30, f"PgBouncer on port {self.port}")

    def url(self, direct: str) -> str:
        """``direct`` (a URL of the test server) through this pooler."""
        pooled = make_url(direct).set(host="127.0.0.1", port=self.port)
        return pooled.render_as_string(hide_password=False)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _write(self, name: str, content: str) -> None:
        path = self.directory / name
        path.write_text(content)
        path.chmod(0o644)

    def _listening(self) -> bool:
        assert self.process.poll() is None, self.log_path.read_text()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0


@pytest.fixture
def pgbouncer() -> Iterator[Callable[..., PgBouncer]]:
    """``pgbouncer(pool_mode, user, ignore_options=True)``: a PgBouncer started for this test."""
    started: list[PgBouncer] = []

    def start(pool_mode: str, user: str, *, ignore_options: bool = True) -> PgBouncer:
        started.append(PgBouncer(pool_mode, user, ignore_options=ignore_options))
        return started[-1]

    yield start
    for bouncer in started:
        bouncer.stop()


@pytest.fixture
def schema_role(postgres_url: str) -> Iterator[str]:
    """A URL of the test server for a role of its own whose search path is this test's schema:
    a session pooler drops the URL's ``options``, so a store behind one finds its schema as a
    deployment does, through its role."""
    schema = make_url(postgres_url).query["options"]
    assert isinstance(schema, str)
    schema = schema.removeprefix("-csearch_path=")
    role = f"jobhost_{uuid.uuid4().hex[:12]}"
    admin = create_engine(make_url(postgres_base_url()), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        connection.execute(text(f'GRANT ALL ON SCHEMA "{schema}" TO "{role}"'))
        connection.execute(text(f'ALTER ROLE "{role}" SET search_path = "{schema}"'))
    url = make_url(postgres_url).set(username=role, password=None)
    try:
        yield url.difference_update_query(["options"]).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP OWNED BY "{role}" CASCADE'))
            connection.execute(text(f'DROP ROLE "{role}"'))
        admin.dispose()


def test_transaction_pooling_fires_every_occurrence_once_and_wakes_the_hosts(
    pgbouncer: Callable[..., PgBouncer], postgres_url: str, tmp_path: Path
) -> None:
    bouncer = pgbouncer("transaction", _user(postgres_url))
    config = _configure(tmp_path, bouncer.url(postgres_url), store_pooling="transaction")
    upgraded = _jobhost(config, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    direct = create_store_engine(postgres_url)
    # One replica listens past the pooler, the other reads the signal counter every second.
    replicas = [
        _host(tmp_path, config, "replica-0", JOBHOST_STORE_LISTEN_URL=postgres_url),
        _host(tmp_path, config, "replica-1"),
    ]
    try:
        wait_for(lambda: len({r.host_id for r in ledger(direct)}) == 2, 30, "both hosts to run")
        wait_for(lambda: _span(direct) >= FIRING_SECONDS, 60, "seconds of occurrences")
        _trigger_is_picked_up(config, direct, replicas)
        for replica in replicas:
            replica.signal(signal.SIGTERM)
        for replica in replicas:
            assert replica.wait(30) == 0, replica.log()
        for replica in replicas:
            assert not [line for line in replica.log().splitlines() if _problem(line)]
        _every_occurrence_ran_once(direct)
    finally:
        for replica in replicas:
            replica.stop()
        direct.dispose()


def test_the_default_behind_a_transaction_pooler_stops_in_one_line(
    pgbouncer: Callable[..., PgBouncer], postgres_url: str, tmp_path: Path
) -> None:
    user = _user(postgres_url)
    dropping = pgbouncer("transaction", user)  # ignores the options startup parameter
    refusing = pgbouncer("transaction", user, ignore_options=False)  # PgBouncer's stock answer
    for bouncer, command in ((dropping, ("run",)), (refusing, ("db", "upgrade"))):
        config = _configure(tmp_path, bouncer.url(postgres_url))
        done = _jobhost(config, *command)
        assert done.returncode == 3, done.stderr
        named = [line for line in done.stderr.splitlines() if "store_pooling" in line]
        assert len(named) == 1, done.stderr
        assert named[0].startswith("jobhost: the store is behind a transaction-mode connection")
        assert "Traceback" not in done.stderr
    direct = create_store_engine(postgres_url)
    with direct.connect() as connection:
        tables = connection.execute(text(TABLES_HERE)).scalar()
    direct.dispose()
    assert tables == 0, "nothing was migrated"


def test_session_pooling_works_with_the_default(
    pgbouncer: Callable[..., PgBouncer], schema_role: str, tmp_path: Path
) -> None:
    bouncer = pgbouncer("session", _user(schema_role))
    config = _configure(tmp_path, bouncer.url(schema_role))
    upgraded = _jobhost(config, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    direct = create_store_engine(schema_role)
    replica = _host(tmp_path, config, "replica-0")
    try:
        wait_for(lambda: _span(direct) >= FIRING_SECONDS // 2, 60, "seconds of occurrences")
        _trigger_is_picked_up(config, direct, [replica])
        replica.signal(signal.SIGTERM)
        assert replica.wait(30) == 0, replica.log()
        assert not [line for line in replica.log().splitlines() if _problem(line)]
        # PgBouncer dropped the options that carry the timeouts: said once, not hidden.
        (dropped,) = [line for line in replica.log().splitlines() if "do not hold" in line]
        assert "statement_timeout" in dropped and "store_pooling" in dropped
        _every_occurrence_ran_once(direct)
    finally:
        replica.stop()
        direct.dispose()


def _trigger_is_picked_up(config: Path, engine: Engine, hosts: list[HostProcess]) -> None:
    done = _jobhost(config, "trigger", BY_HAND["name"], "--json")
    assert done.returncode == 0, done.stderr + "".join(h.log() for h in hosts)
    (run,) = [r for r in ledger(engine) if r.job_name == BY_HAND["name"]]
    assert run.started_at is not None
    assert run.started_at - run.queued_at < PICKED_UP_WITHIN


def _every_occurrence_ran_once(engine: Engine) -> None:
    rows = [r for r in ledger(engine) if r.job_name != BY_HAND["name"] and r.occurrence]
    first = min(r.occurrence for r in rows if r.occurrence) + timedelta(seconds=2)
    last = max(r.occurrence for r in rows if r.occurrence) - timedelta(seconds=2)
    window = [r for r in rows if r.occurrence and first <= r.occurrence <= last]
    seconds = int((last - first).total_seconds()) + 1
    per_occurrence = Counter((r.job_name, r.occurrence) for r in window)
    assert len(per_occurrence) == len(EVERY_SECOND) * seconds, "an occurrence has no row"
    assert set(per_occurrence.values()) == {1}, "an occurrence has more than one row"
    assert {r.outcome for r in window} == {"succeeded"}


def _span(engine: Engine) -> float:
    occurrences = [r.occurrence for r in ledger(engine) if r.occurrence]
    return (max(occurrences) - min(occurrences)).total_seconds() if occurrences else 0.0


def _configure(directory: Path, url: str, **settings: Any) -> Path:
    config = directory / f"jobhost-{free_port()}.toml"
    lines = [f"database_url = {toml_value(url)}", f"plugins = {toml_value([SAMPLE_PLUGIN])}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    lines += ["auto_migrate = false", "[modules.sample]"]
    lines.append(f"log = {toml_value(str(directory / 'runs.log'))}")
    for job in [*EVERY_SECOND, BY_HAND]:
        lines.append("[[modules.sample.jobs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
    config.write_text("\n".join(lines) + "\n")
    return config


def _jobhost(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_LOAD_PLUGINS"] = ""
    return jobhost_command(["--config", str(config), *args], env=env, timeout=60)


def _host(directory: Path, config: Path, host_id: str, **extra: str) -> HostProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env.update(JOBHOST_LOAD_PLUGINS="", JOBHOST_HOST_ID=host_id, **extra)
    return HostProcess(host_id, config, directory / f"{host_id}.log", env)


def _problem(line: str) -> bool:
    return any(word in line for word in PROBLEMS)


def _user(url: str) -> str:
    return make_url(url).username or "postgres"


def _unprivileged_user() -> str:
    for name in ("nobody", "daemon"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    pytest.fail("no unprivileged user (nobody, daemon) to run PgBouncer as")
