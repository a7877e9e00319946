"""Real ``jobhost run`` processes against one PostgreSQL schema."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord
from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.schema import runs
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value


class HostProcess:
    """One ``jobhost run`` child process, its log in a file; ``python`` may start another
    release's interpreter."""

    def __init__(
        self,
        host_id: str,
        config: Path,
        log: Path,
        env: dict[str, str],
        python: Sequence[str] = (sys.executable,),
    ) -> None:
        self.host_id = host_id
        self.log_path = log
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [*python, "-m", "jobhost", "--config", str(config), "run"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start hosts sharing one store: ``cluster(jobs, hosts=[{...env...}], **settings)``.

    The store is PostgreSQL unless ``store_url=`` names another; ``cluster(None, hosts=...)``
    starts more hosts on the configuration already written (a restart under an old id: pass
    its ``JOBHOST_HOST_ID``). Each start of an id logs to a file of its own.
    """
    started: list[HostProcess] = []
    engines: list[Engine] = []

    def start(
        jobs: list[dict[str, Any]] | None,
        hosts: list[dict[str, str]],
        store_url: str | None = None,
        **settings: str,
    ) -> tuple[Engine, list[HostProcess]]:
        config = tmp_path / "jobhost.toml"
        if jobs is None:
            return engines[-1], [_launch(index, extra) for index, extra in enumerate(hosts)]
        url = store_url or str(request.getfixturevalue("postgres_url"))
        lines = [f'database_url = "{url}"', f'plugins = ["{SAMPLE_PLUGIN}"]']
        lines += [f'{key} = "{value}"' for key, value in settings.items()]
        lines += ["[modules.sample]", f'log = "{tmp_path / "runs.log"}"']
        for job in jobs:
            lines.append("[[modules.sample.jobs]]")
            lines += [f"{k} = {toml_value(v)}" for k, v in job.items()]
        config.write_text("\n".join(lines) + "\n")
        engine = create_store_engine(url)
        engines.append(engine)
        upgrade(engine)
        return engine, [_launch(index, extra) for index, extra in enumerate(hosts)]

    def _launch(index: int, extra: dict[str, str]) -> HostProcess:
        host_id = extra.get("JOBHOST_HOST_ID", f"replica-{index}")
        env = {**os.environ, "JOBHOST_LOAD_PLUGINS": "", "JOBHOST_HOST_ID": host_id, **extra}
        starts = sum(1 for h in started if h.host_id == host_id)
        log = tmp_path / (f"{host_id}.log" if not starts else f"{host_id}.{starts}.log")
        started.append(HostProcess(host_id, tmp_path / "jobhost.toml", log, env))
        return started[-1]

    yield start
    for host in started:
        host.stop()
    for engine in engines:
        engine.dispose()


def store_url(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a test's store: an SQLite file of its own, or the PostgreSQL test server's
    (``store`` is ``"sqlite"`` or ``"postgres"``, as the tests' parameter says)."""
    if store == "sqlite":
        return f"sqlite:///{tmp_path / 'jobhost.db'}"
    return str(request.getfixturevalue("postgres_url"))


def ledger(engine: Engine) -> list[RunRecord]:
    with reading(engine) as connection:
        rows = connection.execute(select(runs).order_by(runs.c.queued_at)).mappings()
        return [RunRecord.from_row(r) for r in rows]
