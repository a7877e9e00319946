"""Helpers for the files tests: an in-memory JobState, a context, files with chosen ages."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobhost_contracts import Cancellation, JobContext, JobState, TriggerSource, module_settings
from jobhost_files.settings import FilesSettings

JOB = "files.orphan-cleanup"
NOW = datetime(2026, 11, 30, 3, 17, tzinfo=UTC)
OLD = NOW.timestamp() - 2 * 86400
YOUNG = NOW.timestamp() - 60

REFERENCED = ("a/kept-1.txt", "a/kept-2.txt", "b/c/kept-3.txt")
ORPHANS = ("a/orphan-1.txt", "b/c/orphan-2.txt", "b/orphan-3.txt", "z-orphan-4.txt")
YOUNG_ORPHAN = "b/young.txt"


def files_settings(section: dict[str, Any]) -> FilesSettings:
    """``section`` read as the plugin reads ``[modules.files]``."""
    settings = module_settings(FilesSettings, {"files": section}, "files")
    assert settings is not None
    return settings


class DictState:
    """An in-memory JobState for tests that do not test fencing.

    ``fail_on_set`` makes the n-th ``set`` raise (a process dying before its cursor commit);
    ``writes`` keeps every (key, value) written, in order.
    """

    def __init__(self, fail_on_set: int | None = None) -> None:
        self.values: dict[str, str] = {}
        self.done: set[str] = set()
        self.writes: list[tuple[str, str]] = []
        self._fail_on_set = fail_on_set
        self.after_set: Callable[[str, str], None] | None = None

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        if self._fail_on_set is not None and len(self.writes) + 1 == self._fail_on_set:
            self._fail_on_set = None
            raise RuntimeError("process killed before the cursor commit")
        self.values[key] = value
        self.writes.append((key, value))
        if self.after_set is not None:
            self.after_set(key, value)

    def record(self, idempotency_key: str) -> bool:
        if idempotency_key in self.done:
            return False
        self.done.add(idempotency_key)
        return True

    def seen(self, idempotency_key: str) -> bool:
        return idempotency_key in self.done


def make_context(
    state: JobState,
    *,
    config: dict[str, Any] | None = None,
    cancellation: Cancellation | None = None,
    attempt: int = 1,
    token: int = 1,
) -> JobContext:
    return JobContext(
        job_name=JOB,
        run_id=f"run-{attempt}-{time.monotonic_ns()}",
        occurrence=NOW,
        attempt=attempt,
        source=TriggerSource.SCHEDULE,
        idempotency_key=f"{JOB}:2026-11-30T03:17:00Z",
        fencing_token=token,
        config=config or {},
        logger=logging.getLogger(f"jobhost.job.{JOB}"),
        cancellation=cancellation or Cancellation(),
        state=state,
    )


def write_file(path: Path, mtime: float, content: str = "data\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    os.utime(path, (mtime, mtime))
    return path


def write_references(database: Path, paths: Iterable[str | None]) -> None:
    connection = sqlite3.connect(database)
    with connection:
        connection.execute("CREATE TABLE IF NOT EXISTS refs (path TEXT)")
        connection.execute("DELETE FROM refs")
        connection.executemany("INSERT INTO refs (path) VALUES (?)", [(p,) for p in paths])
    connection.close()


def files_under(root: Path) -> set[str]:
    """Every regular file under root, relative, without following links."""
    found: set[str] = set()
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                found.add(path.relative_to(root).as_posix())
    return found
