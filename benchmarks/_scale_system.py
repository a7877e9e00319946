"""What ``benchmarks/scale.py`` reads from the machine: processes, /proc, PostgreSQL databases.

Every child process is started through :class:`Children`, in a session of its own (so a Ctrl-C
in the terminal reaches the benchmark, which then stops them in order), and is stopped by
:meth:`Children.stop_all` however the benchmark ends. Private PostgreSQL databases are dropped
the same way by :class:`Postgres`.
"""

from __future__ import annotations

import os
import platform
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine, make_url

__all__ = [
    "Children",
    "Postgres",
    "backend_cpu",
    "cpu_seconds",
    "machine",
    "peak_rss_mb",
    "voluntary_switches",
]

_TICKS = os.sysconf("SC_CLK_TCK")


class Children:
    """The processes this benchmark started; ``stop`` is SIGTERM, a wait, then SIGKILL."""

    def __init__(self) -> None:
        self.live: list[subprocess.Popen[bytes]] = []

    def start(
        self, argv: Sequence[str], env: Mapping[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as output:
            process = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.live.append(process)
        return process

    def stop(self, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if process in self.live:
            self.live.remove(process)

    def stop_all(self) -> None:
        for process in list(self.live):
            self.stop(process, timeout=10.0)


class Postgres:
    """Private databases on the shared PostgreSQL server, one per measured run, dropped after.

    A database, not a schema: jobhost wakes its hosts with NOTIFY, whose channels belong to a
    database, so a schema on a busy shared database would be woken by every other host there.
    """

    def __init__(self, base_url: str) -> None:
        self.base = make_url(base_url)
        self.engine: Engine = create_engine(self.base, isolation_level="AUTOCOMMIT")
        self.made: list[str] = []

    def create(self, application: str) -> str:
        """A new database; the URL whose connections land in it, named ``application``."""
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with self.engine.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        self.made.append(name)
        url: URL = self.base.set(database=name).update_query_dict({"application_name": application})
        return url.render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self.engine.connect() as connection:
            for name in self.made:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.made.clear()

    def version(self) -> str:
        with self.engine.connect() as connection:
            return str(connection.execute(text("SHOW server_version")).scalar())


def backend_cpu(postgres: Postgres | None, application: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving ``application``, by pid."""
    if postgres is None:
        return {}
    with postgres.engine.connect() as connection:
        pids = connection.execute(
            text("SELECT pid FROM pg_stat_activity WHERE application_name = :name"),
            {"name": application},
        ).scalars()
        return {pid: cpu_seconds(pid) for pid in pids}


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """utime + stime of a process (all its threads), or of one of its threads, from /proc; 0
    once it is gone."""
    where = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        fields = Path(where).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def voluntary_switches(pid: int, thread: int | None = None) -> int:
    """Times a thread of the process (the main one by default) gave up the CPU of its own
    accord (waits, sleeps): each is one wake-up after it."""
    try:
        status = Path(f"/proc/{pid}/task/{thread or pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def machine(postgres: str | None) -> list[str]:
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    memory = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return [
        f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {model}, "
        f"{int(memory) / 1024 / 1024:.1f} GiB, load average {load}",
        f"software: Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"PostgreSQL {postgres or 'not used'}, APScheduler {metadata.version('apscheduler')}, "
        f"SQLAlchemy {metadata.version('sqlalchemy')}, jobhost {metadata.version('jobhost')} "
        f"at {_commit()}",
        f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
    ]


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return out.stdout.strip()
