"""The jobs of ``benchmarks/scale.py``, loaded by ``jobhost run`` as a plain ``.py`` plugin.

``[modules.bench]`` says what to declare: ``jobs`` jobs of one ``shape`` (``every-second``:
interval 1s; ``hourly``: one every-second job ``bench.first`` plus jobs spread over the hour;
``nightly``: at 03:00 UTC), and with ``backfill_job = true`` a nightly ``bench.backfill`` (03:00
UTC) for backfills to replay; ``log_lines`` lines written through ``context.logger`` per run (0).
Every run appends ``run JOB OCCURRENCE OBSERVED`` (Unix seconds) to ``fires-PID.log`` under
``log_dir``, so the benchmark counts fires and duplicates from the executor's side, whatever the
ledger says.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import IO, Any

from jobhost_contracts import BackgroundJobDeclaration, JobContext, JobRegistration, hookimpl
from returns.result import Result, Success

_lock = threading.Lock()
_PAYLOAD = "tenant-042 batch processed: 250 rows read, 248 written, 2 skipped (already done)"
_handles: dict[str, IO[str]] = {}


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    section = settings.get("bench", {})
    count = int(section.get("jobs", 0))
    shape = str(section.get("shape", "every-second"))
    executor = _Record(str(section["log_dir"]), int(section.get("log_lines", 0)))
    declarations = _declare(shape, count)
    if section.get("backfill_job"):
        # Nightly, so it never fires in a window: only the backfill section's replays run it.
        declarations.append(_job("bench.backfill", cron="0 3 * * *"))
    return [JobRegistration(declaration, executor) for declaration in declarations]


def _declare(shape: str, count: int) -> list[BackgroundJobDeclaration]:
    if shape == "every-second":
        return [_job(f"bench.j{i:05d}", interval=timedelta(seconds=1)) for i in range(count)]
    if shape == "nightly":
        return [_job(f"bench.n{i:05d}", cron="0 3 * * *") for i in range(count)]
    if shape == "hourly":
        # Spread over the hour (second, minute), as an application's catalog would be.
        spread = [
            _job(f"bench.h{i:05d}", cron=f"{i % 60} {(i // 60) % 60} * * * *")
            for i in range(max(count - 1, 0))
        ]
        return [_job("bench.first", interval=timedelta(seconds=1)), *spread]
    raise ValueError(f"[modules.bench] shape = {shape!r}: use every-second, hourly or nightly")


def _job(
    name: str, *, cron: str | None = None, interval: timedelta | None = None
) -> BackgroundJobDeclaration:
    return BackgroundJobDeclaration(
        name=name, module="bench", cron=cron, interval=interval, configuration_source="bench"
    )


class _Record:
    """Does nothing but note when it ran, for which occurrence, in this process."""

    def __init__(self, log_dir: str, log_lines: int = 0) -> None:
        self.log_dir = log_dir
        self.log_lines = log_lines

    def execute(self, context: JobContext) -> Result[str, str]:
        observed = time.time()
        for step in range(self.log_lines):
            # About 100 characters a line, as a job's progress lines are.
            context.logger.info("step %d of %d: %s", step + 1, self.log_lines, _PAYLOAD)
        occurrence = context.occurrence.timestamp() if context.occurrence else 0.0
        line = f"run {context.job_name} {occurrence:.6f} {observed:.6f}\n"
        with _lock:
            handle = _handles.get(self.log_dir)
            if handle is None:
                path = os.path.join(self.log_dir, f"fires-{os.getpid()}.log")
                handle = _handles[self.log_dir] = open(path, "a", encoding="utf-8")  # noqa: SIM115
            handle.write(line)
            handle.flush()
        return Success("ok")
