"""Real ``jobhost run`` replicas under faults, shared by the reliability suite and the soak script.

A :class:`Cluster` writes one configuration (the ``rel`` plugin's jobs, whose executors record
their side effects in a file) and starts replicas from it; a :class:`Replica` can be killed with
``SIGKILL``, restarted, frozen and measured. :func:`run_faults` drives the faults the issue names
(kill -9 and restart of one replica, a database outage through a :class:`CutProxy`) on a fixed
cycle for as long as asked; the suite runs one cycle, ``benchmarks/soak.py`` as many as it likes.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from jobhost.store import create_store_engine, upgrade
from tests.process.conftest import ledger
from tests.reliability.proxy import CutProxy
from tests.toml_values import toml_value

__all__ = [
    "PLUGIN",
    "Cluster",
    "Memory",
    "Replica",
    "every_second_jobs",
    "ledger",
    "private_schema",
    "run_faults",
    "slow_jobs",
    "through_proxy",
]

PLUGIN = str(Path(__file__).resolve().parent / "reliability_jobs.py")
_ROOT = Path(__file__).resolve().parents[2]


class Replica:
    """One ``jobhost run`` process at a time under one host id; restartable."""

    def __init__(self, host_id: str, config: Path, directory: Path, env: dict[str, str]) -> None:
        self.host_id = host_id
        self._config = config
        self._directory = directory
        self._env = env
        self._starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log_paths: list[Path] = []
        self.started_at = 0.0
        self._terminated = 0
        self.killed: dict[int, float] = {}
        """pid -> when (Unix time) it was killed."""
        self.start()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        self._starts += 1
        path = self._directory / f"{self.host_id}.{self._starts}.log"
        self._log_paths.append(path)
        self.started_at = time.monotonic()
        with path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "jobhost", "--config", str(self._config), "run"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                cwd=_ROOT,
            )

    def kill(self) -> None:
        """``kill -9``: no shutdown, no lease released, nothing recorded."""
        assert self._process is not None
        self._process.kill()
        self.killed[self._process.pid] = time.time()
        self._process.wait(10)

    def signal(self, signum: signal.Signals) -> None:
        assert self._process is not None
        self._process.send_signal(signum)

    def terminate(self) -> None:
        """SIGTERM, once per process: a second one makes the host exit at once, unclean."""
        if self._process is not None and self._terminated != self._process.pid:
            self._terminated = self._process.pid
            self._process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM and wait; SIGKILL (and None) if it does not stop within ``timeout``."""
        if self._process is None or self._process.poll() is not None:
            return None if self._process is None else self._process.returncode
        self.terminate()
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def rss_mb(self) -> float:
        """Resident memory of the current process, in MB (0 when it is not running)."""
        if not self.alive:
            return 0.0
        status = Path(f"/proc/{self.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self._log_paths if p.exists())


class Cluster:
    """Replicas sharing one store and one configuration; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        database_url: str,
        jobs: list[dict[str, Any]],
        **settings: str,
    ) -> None:
        self.directory = directory
        self.effects = directory / "effects.log"
        self.config = directory / "jobhost.toml"
        self.replicas: list[Replica] = []
        lines = [f'database_url = "{database_url}"', f'plugins = ["{PLUGIN}"]']
        lines += [f'{key} = "{value}"' for key, value in settings.items()]
        lines += ["[modules.rel]", f'effects = "{self.effects}"']
        for job in jobs:
            lines.append("[[modules.rel.jobs]]")
            lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
        self.config.write_text("\n".join(lines) + "\n")

    def add(self, host_id: str, **env: str) -> Replica:
        environment = {**os.environ, "JOBHOST_LOAD_PLUGINS": "", "JOBHOST_HOST_ID": host_id, **env}
        replica = Replica(host_id, self.config, self.directory, environment)
        self.replicas.append(replica)
        return replica

    def jobhost(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A one-off ``jobhost`` command (``health``, ``report``) on this configuration."""
        return subprocess.run(
            [sys.executable, "-m", "jobhost", "--config", str(self.config), *args],
            capture_output=True,
            text=True,
            env={**os.environ, "JOBHOST_LOAD_PLUGINS": ""},
            cwd=_ROOT,
            timeout=120,
            check=False,
        )

    def killed(self) -> dict[int, float]:
        """Every killed pid and when it was killed."""
        return {pid: at for replica in self.replicas for pid, at in replica.killed.items()}

    def logs(self) -> str:
        return "".join(replica.log() for replica in self.replicas)

    def stop(self) -> dict[str, int | None]:
        """SIGTERM every live replica at once; their exit codes (None: had to be killed)."""
        live = [replica for replica in self.replicas if replica.alive]
        for replica in live:
            replica.terminate()
        return {replica.host_id: replica.stop(30) for replica in live}


class Memory:
    """RSS of every replica process: first sampled once it is ``settle`` seconds old, and last."""

    def __init__(self, cluster: Cluster, settle: float = 10.0) -> None:
        self._cluster = cluster
        self._settle = settle
        self.samples: dict[tuple[str, int], tuple[float, float, float]] = {}
        """(host id, pid) -> (first MB, last MB, seconds between them)."""
        self._first_at: dict[tuple[str, int], float] = {}

    def sample(self) -> None:
        now = time.monotonic()
        for replica in self._cluster.replicas:
            if not replica.alive or now - replica.started_at < self._settle:
                continue
            key = (replica.host_id, replica.pid)
            rss = replica.rss_mb()
            first_at = self._first_at.setdefault(key, now)
            first = self.samples.get(key, (rss, rss, 0.0))[0]
            self.samples[key] = (first, rss, now - first_at)

    def grown(self, allowed_mb: float, share: float, over: float) -> list[str]:
        """Processes sampled over at least ``over`` seconds whose RSS grew past the bound."""
        return [
            f"{host} pid {pid}: {first:.1f} MB -> {last:.1f} MB in {span:.0f}s"
            for (host, pid), (first, last, span) in self.samples.items()
            if span >= over and last - first > max(allowed_mb, share * first)
        ]

    def lines(self) -> list[str]:
        return [
            f"  {host:<12} pid {pid:<8} {first:7.1f} MB -> {last:7.1f} MB over {span:4.0f}s"
            for (host, pid), (first, last, span) in sorted(self.samples.items())
        ]


def every_second_jobs(count: int, prefix: str = "rel.tick") -> list[dict[str, Any]]:
    return [{"name": f"{prefix}-{index:02d}", "cron": "* * * * * *"} for index in range(count)]


def slow_jobs(count: int) -> list[dict[str, Any]]:
    """Jobs that run for 2 s every 3 s, so that some run is always in flight when a fault hits."""
    return [
        {"name": f"rel.slow-{i:02d}", "cron": "*/3 * * * * *", "behaviour": "sleep", "seconds": 2}
        for i in range(count)
    ]


@contextmanager
def private_schema(base_url: str) -> Iterator[tuple[str, Engine]]:
    """A fresh schema on the shared server, migrated: (its URL, an engine on it); dropped after."""
    base = make_url(base_url).set(drivername="postgresql+psycopg")
    schema = f"rel_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = base.update_query_dict({"options": f"-csearch_path={schema}"})
    rendered = url.render_as_string(hide_password=False)
    engine = create_store_engine(rendered)
    try:
        upgrade(engine)
        yield rendered, engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def through_proxy(url: str, proxy: CutProxy) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parsed = make_url(url).set(host="127.0.0.1", port=proxy.port)
    return parsed.render_as_string(hide_password=False)


def run_faults(
    cluster: Cluster,
    proxy: CutProxy,
    seconds: float,
    *,
    outage: float = 18.0,
    cycle: float = 75.0,
    say: Callable[[str], None] = lambda _: None,
    every_second: Callable[[], None] = lambda: None,
    restart_after: Sequence[float] = (5.0,),
) -> None:
    """For ``seconds``, repeat a ``cycle``: kill -9 a replica at 10 s and restart it under its
    id ``restart_after`` seconds later (each cycle the next replica and the next delay of the
    sequence: a short one restarts it before anyone sees it dead), cut the database at 30 s for
    ``outage`` seconds."""
    began = time.monotonic()
    victims = itertools.count()
    delays = itertools.cycle(restart_after)
    plan: list[tuple[float, str]] = []
    offset = 0.0
    while offset < seconds:
        delay = next(delays)
        if offset + 10 + delay < seconds:
            plan += [(offset + 10, "kill"), (offset + 10 + delay, "restart")]
        if offset + 30 + outage < seconds:
            plan += [(offset + 30, "cut"), (offset + 30 + outage, "restore")]
        offset += cycle
    victim: Replica | None = None
    for at, action in sorted(plan):
        if at >= seconds:
            break
        _pass_time(began, at, every_second)
        if action == "kill":
            victim = cluster.replicas[next(victims) % len(cluster.replicas)]
            say(f"{at:5.0f}s kill -9 {victim.host_id} (pid {victim.pid})")
            victim.kill()
        elif action == "restart" and victim is not None:
            victim.start()
            say(f"{at:5.0f}s restarted {victim.host_id} (pid {victim.pid})")
        elif action == "cut":
            say(f"{at:5.0f}s database cut for {outage:g}s")
            proxy.cut()
        elif action == "restore":
            proxy.restore()
            say(f"{at:5.0f}s database back")
    _pass_time(began, seconds, every_second)
    proxy.restore()


def _pass_time(began: float, until: float, every_second: Callable[[], None]) -> None:
    while (left := until - (time.monotonic() - began)) > 0:
        time.sleep(min(1.0, left))
        every_second()
