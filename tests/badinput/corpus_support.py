"""Running one bad-input case: its own directory, configuration and copy of a prepared store.

A :class:`Case` says what goes wrong (a settings line, an environment variable, a plugin, a
damaged row, a command line) and what the operator must see: the exit code, words naming the
problem and its fix, no Python traceback, no secret, and the store unchanged unless the command
is one that writes (then every row that was there is still there).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.firing.tick import desired_schedules
from jobhost.store import create_store_engine, upgrade
from jobhost.store.registry import sync_schedules

UNRULY = str(Path(__file__).parent / "unruly_jobs.py")
SECRET = "S3cretPW"


@dataclass(frozen=True)
class Case:
    """One bad input and what the operator must see."""

    id: str
    args: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    settings: Mapping[str, str] = field(default_factory=dict)  # top-level key -> TOML value
    tables: str = ""  # TOML tables appended to the configuration
    raw_config: str | None = None  # the whole configuration file, replacing the generated one
    env: Mapping[str, str] = field(default_factory=dict)
    plugin: str | None = None  # source of an extra plugin file, added to `plugins`
    corrupt: str | None = None  # SQL run on this case's copy of the store first
    store: bool = True  # False: no store and no configuration (a fresh directory)
    writes: bool = False  # the command may add rows; none may be lost
    new_runs: tuple[str, ...] = ()  # outcomes of the run rows a writing command must add
    never: tuple[str, ...] = (SECRET,)
    fresh: bool = False  # run as `python -m jobhost` from scratch, not forked from a warm server
    job_traceback: bool = False  # the log may show the job's own exception, with its traceback


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    before: dict[str, list[str]]
    after: dict[str, list[str]]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def prepare_template(directory: Path) -> Path:
    """A migrated store with every table holding a row, scheduled for the corpus catalog."""
    from tests.badinput.corpus_rows import fill_rows

    store = directory / "template.db"
    engine = create_store_engine(f"sqlite:///{store}")
    try:
        upgrade(engine)
        settings = Settings(
            database_url=f"sqlite:///{store}", plugins=[UNRULY], modules=base_modules()
        )
        catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
        assert catalog.ok, [p.line() for p in catalog.problems]
        with engine.begin() as connection:
            from datetime import UTC, datetime

            sync_schedules(connection, desired_schedules(catalog.jobs), datetime.now(UTC))
            fill_rows(connection)
    finally:
        engine.dispose()
    return store


def base_modules() -> dict[str, Any]:
    from tests.badinput.unruly_jobs import BEHAVIOURS

    jobs = [{"name": f"unruly.{b}", "behaviour": b} for b in BEHAVIOURS]
    return {"unruly": {"jobs": jobs}}


class Launcher:
    """Runs commands: forked from warm servers (one per worker thread), or from scratch."""

    def __init__(self, servers: int) -> None:
        self._idle: queue.SimpleQueue[subprocess.Popen[str]] = queue.SimpleQueue()
        self._all: list[subprocess.Popen[str]] = []
        for _ in range(servers):
            server = subprocess.Popen(
                [sys.executable, str(Path(__file__).parent.parent / "forkserver.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).parent.parent.parent,
            )
            self._all.append(server)
            self._idle.put(server)

    def close(self) -> None:
        for server in self._all:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
            if server.stdout is not None:
                server.stdout.close()

    def run(
        self, argv: list[str], env: dict[str, str], cwd: Path, *, fresh: bool
    ) -> tuple[int, str, str]:
        if fresh:
            done = subprocess.run(
                [sys.executable, "-m", "jobhost", *argv],
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            return done.returncode, done.stdout, done.stderr
        out, err = cwd / "command.stdout", cwd / "command.stderr"
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd),
            "stdout": str(out),
            "stderr": str(err),
        }
        server = self._idle.get()
        try:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            code = int(json.loads(server.stdout.readline())["code"])
        finally:
            self._idle.put(server)
        read = {"encoding": "utf-8", "errors": "replace"}
        return code, out.read_text(**read), err.read_text(**read)


def run_case(case: Case, directory: Path, template: Path, launcher: Launcher) -> Result:
    directory.mkdir(parents=True)
    store = directory / "store.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_LOAD_PLUGINS"] = ""
    command: list[str] = []
    if case.store:
        shutil.copy(template, store)
        if case.corrupt and case.corrupt.startswith("FILE:"):
            store.write_text(case.corrupt.removeprefix("FILE:"))
        elif case.corrupt:
            _execute(store, case.corrupt)
        config = directory / "jobhost.toml"
        text = case.raw_config if case.raw_config is not None else _config(case, store)
        text = text.replace("{dir}", str(directory))
        config.write_text(text, errors="surrogateescape")  # lets a case write bytes not UTF-8
        command += ["--config", str(config)]
    env.update({k: v.replace("{dir}", str(directory)) for k, v in case.env.items()})
    before = dump(store)
    argv = [*command, *(a.replace("{dir}", str(directory)) for a in case.args)]
    code, stdout, stderr = launcher.run(argv, env, directory, fresh=case.fresh)
    return Result(code, stdout, stderr, before, dump(store))


def dump(store: Path) -> dict[str, list[str]]:
    """Every row of every table, as sorted JSON lines; empty when there is no store."""
    if not store.exists() or store.stat().st_size == 0:
        return {}
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        names = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        tables: dict[str, list[str]] = {}
        for name in names:
            rows = connection.execute(f'SELECT * FROM "{name}"').fetchall()
            tables[name] = sorted(json.dumps(row, default=_text) for row in rows)
        return tables
    except sqlite3.DatabaseError:
        return {"unreadable": [hashlib.sha256(store.read_bytes()).hexdigest()]}
    finally:
        connection.close()


def lost_rows(result: Result) -> list[str]:
    """Rows present before and gone after, by their primary key (the leading columns)."""
    lost: list[str] = []
    for table, rows in result.before.items():
        width = 2 if table in {"job_state", "job_idempotency"} else 1
        after = {tuple(json.loads(row)[:width]) for row in result.after.get(table, [])}
        lost += [f"{table}: {r}" for r in rows if tuple(json.loads(r)[:width]) not in after]
    return lost


def job_tracebacks_only(output: str) -> bool:
    """Whether every traceback printed is a job's own exception, logged by the envelope."""
    blocks = output.split("Traceback (most recent call last):")[1:]
    return all("unruly_jobs.py" in block.split("\n\n")[0] for block in blocks)


def new_run_outcomes(result: Result) -> list[str]:
    before = set(result.before.get("runs", []))
    added = [json.loads(row) for row in result.after.get("runs", []) if row not in before]
    # The outcome column is the sixth (id, job_name, occurrence, attempt, source, outcome, ...).
    return sorted(str(row[5]) for row in added)


def _config(case: Case, store: Path) -> str:
    top: dict[str, str] = {
        "database_url": json.dumps(f"sqlite:///{store}"),
        "plugins": json.dumps(
            [UNRULY, *([str(store.parent / "plugin.py")] if case.plugin else [])]
        ),
    }
    if case.plugin:
        (store.parent / "plugin.py").write_text(case.plugin)
    top.update(case.settings)
    lines = [f"{key} = {value}" for key, value in top.items()]
    lines.append(case.tables)
    for job in base_modules()["unruly"]["jobs"]:
        lines += ["[[modules.unruly.jobs]]", f'name = "{job["name"]}"']
        lines.append(f'behaviour = "{job["behaviour"]}"')
    return "\n".join(lines).replace("{dir}", str(store.parent)) + "\n"


def _execute(store: Path, sql: str) -> None:
    connection = sqlite3.connect(store)
    try:
        connection.executescript(sql)
        connection.commit()
    finally:
        connection.close()


def _text(value: object) -> str:
    return repr(value)
