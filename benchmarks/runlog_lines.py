"""What one line a job writes costs: ``python benchmarks/runlog_lines.py``.

Runs of ``--lines`` lines (20) of about 100 characters each, written at INFO through the logger a
run's ``context.logger`` is (:class:`jobhost.envelope.runlog.JobLogger`) and, beside it in the
same process, through the registered ``jobhost.job.NAME`` logger (a plain ``logging.Logger``:
a ``LogRecord``, the handlers, the run-log capture handler), with the host's logging set up as
``jobhost run`` sets it (``--log-level``, ``--log-format``; stderr goes to /dev/null). Then the
run-log writer's share of a line: taking the buffers, the rows' bodies and the insert into a
SQLite store. Printed: CPU microseconds of the calling thread per line (best of ``--repeat``),
and the ratio of the two loggers. At WARNING the lines are kept only in the run log; at INFO
stderr prints them too, and both loggers take the standard path.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jobhost.cli._app import configure_logging
from jobhost.envelope.runlog import JobLogger, RunLog, RunLogWriter, running
from jobhost.store import Store, create_store_engine, upgrade

_PAYLOAD = "x" * 80
_JOB = "bench.talk"
_RUN_IDS = itertools.count(1)


def main() -> None:
    arguments = _arguments()
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")  # noqa: SIM115 (kept to the end)
    configure_logging(arguments.log_level, arguments.log_format)  # its handler: /dev/null
    sys.stderr = stderr
    with tempfile.TemporaryDirectory() as folder:
        engine = create_store_engine(f"sqlite:///{Path(folder) / 'bench.db'}")
        upgrade(engine)
        store = Store(engine)
        writer = RunLogWriter(
            store,
            max_lines=1000,
            max_bytes=256 * 1024,
            level=arguments.log_level,
            flush_seconds=3600,
        )
        try:
            _report(arguments, store, writer)
        finally:
            writer.close()
            engine.dispose()


def _report(arguments: argparse.Namespace, store: Store, writer: RunLogWriter) -> None:
    lines, runs, repeat = arguments.lines, arguments.runs, arguments.repeat
    plain = logging.getLogger(f"jobhost.job.{_JOB}")
    print(
        f"{runs} runs of {lines} lines, log_level {arguments.log_level}, "
        f"log_format {arguments.log_format}; CPU microseconds per line, best of {repeat}"
    )
    ours = _best(
        repeat,
        lambda: _lines(
            store, writer, lines, runs, lambda run_log: JobLogger(f"jobhost.job.{_JOB}", run_log)
        ),
    )
    theirs = _best(repeat, lambda: _lines(store, writer, lines, runs, lambda _run_log: plain))
    written = _best(repeat, lambda: _written(store, writer, lines, runs))
    print(f"{'context.logger (JobLogger)':<44} {ours:>7.2f}")
    print(f"{'plain logging.Logger, same handlers':<44} {theirs:>7.2f}")
    print(f"{'ratio context.logger / plain':<44} {ours / theirs:>7.2f}x")
    print(f"{'run-log writer: take, rows, SQLite insert':<44} {written:>7.2f}")


def _lines(
    store: Store,
    writer: RunLogWriter,
    lines: int,
    runs: int,
    logger_of: Callable[[RunLog], logging.Logger],
) -> float:
    """CPU seconds per line of ``runs`` runs writing ``lines`` lines each, logger made per run
    (as the envelope makes it); the buffers are emptied, untimed, after each run."""
    spent = 0.0
    for _ in range(runs):
        run_log = writer.open(f"run-{next(_RUN_IDS)}", _JOB, 1)
        with running(run_log):
            start = time.thread_time()
            logger = logger_of(run_log)
            for step in range(lines):
                logger.info("step %d of %d: %s", step + 1, lines, _PAYLOAD)
            spent += time.thread_time() - start
        _finish(store, writer, [run_log])
    return spent / (lines * runs)


def _written(store: Store, writer: RunLogWriter, lines: int, runs: int) -> float:
    """CPU seconds per line the writer spends storing what ``runs`` runs wrote."""
    logger = logging.getLogger(f"jobhost.job.{_JOB}")
    opened = []
    for _ in range(runs):
        run_log = writer.open(f"run-{next(_RUN_IDS)}", _JOB, 1)
        with running(run_log):
            for step in range(lines):
                logger.info("step %d of %d: %s", step + 1, lines, _PAYLOAD)
        opened.append(run_log)
    start = time.thread_time()
    _finish(store, writer, opened)
    return (time.thread_time() - start) / (lines * runs)


def _best(repeat: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(repeat)) * 1_000_000


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=20, help="lines a run writes (20)")
    parser.add_argument("--runs", type=int, default=500, help="runs measured (500)")
    parser.add_argument("--repeat", type=int, default=5, help="measurements, best kept (5)")
    parser.add_argument("--log-level", default="WARNING", help="the host's log_level (WARNING)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    return parser.parse_args()


def _finish(store: Store, writer: RunLogWriter, run_logs: list[RunLog]) -> None:
    """Write the last lines of ended runs, as the recorder does in its outcomes' transaction."""
    with writer.finishing(run_logs) as logs:
        store.record_finished(logs)


if __name__ == "__main__":
    main()
