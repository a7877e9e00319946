"""``context.logger``: a standard logger whose lines stderr would not show go straight to the
run's log (no ``LogRecord``), while stderr, text or JSON, gets every line it got before."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy.engine import Engine

from jobhost.cli._app import configure_logging
from jobhost.envelope.runlog import JobLogger, RunLogWriter, running
from jobhost.records import LogLine
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.runlogs import read_lines

_JOB = "sample.talk"


@dataclass
class Host:
    """A host's logging as ``jobhost run`` sets it up, its stderr kept, and a run-log writer."""

    engine: Engine
    writer: RunLogWriter
    stderr: io.StringIO
    records: list[logging.LogRecord]
    """Every ``LogRecord`` made while the test ran."""

    def run(self, run_id: str, job: Callable[[logging.Logger], None]) -> list[LogLine]:
        """Run ``job`` with its run's logger, as the envelope does; the lines stored."""
        run_log = self.writer.open(run_id, _JOB, 1)
        with running(run_log):
            job(JobLogger(f"jobhost.job.{_JOB}", run_log))
        with self.writer.finishing([run_log]) as logs:  # as the recorder writes them
            Store(self.engine).record_finished(logs)
        with reading(self.engine) as connection:
            entries = read_lines(connection, run_id)
        return [entry for entry in entries if isinstance(entry, LogLine)]

    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.getvalue().splitlines() if line]


@pytest.fixture
def host(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str], Host]]:
    root = logging.getLogger()
    jobs = logging.getLogger("jobhost.job")
    levels = (root.level, jobs.level)
    kept: list[logging.Handler] = []
    stderr = io.StringIO()
    records: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counted(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        records.append(record)
        return record

    engine = create_store_engine(store_url)
    upgrade(engine)
    writers: list[RunLogWriter] = []

    def make(level: str, log_format: str) -> Host:
        # pytest's capture handlers (added for the test's call, taken off by pytest after it)
        # take every level: with them every line would take the standard path. The host has
        # only its stderr handler.
        for handler in root.handlers[:]:
            root.removeHandler(handler)
            if not type(handler).__module__.startswith("_pytest"):
                kept.append(handler)
        monkeypatch.setattr(sys, "stderr", stderr)  # pytest sets its own for the call
        configure_logging(level, log_format)
        writer = RunLogWriter(Store(engine), max_lines=1000, max_bytes=256_000, level=level)
        writers.append(writer)
        logging.setLogRecordFactory(counted)
        return Host(engine, writer, stderr, records)

    try:
        yield make
    finally:
        logging.setLogRecordFactory(factory)
        for writer in writers:
            writer.close()
        engine.dispose()
        for handler in root.handlers[:]:
            if handler.get_name() == "jobhost-stderr" and handler not in kept:
                root.removeHandler(handler)
        for handler in kept:
            root.addHandler(handler)
        root.setLevel(levels[0])
        jobs.setLevel(levels[1])


def _job(logger: logging.Logger) -> None:
    logger.info("step %d of %s", 1, "two")
    logger.info("connecting to postgresql://app:s3cret@db/prod")
    logger.warning("careful: %(what)s is %(pct)d%% full", {"what": "disk", "pct": 91})
    logger.debug("below the level kept")
    logger.info("rows copied", extra={"rows": 3})
    try:
        raise ValueError("no such table")
    except ValueError:
        logger.exception("copy failed at %s", "orders")
    logger.log(logging.INFO, "done in %.1fs", 1.25)


def test_quiet_lines_go_to_the_run_log_without_a_record_and_shown_ones_to_stderr_too(
    host: Callable[[str, str], Host],
) -> None:
    made = host("WARNING", "text")
    lines = made.run("run-text", _job)
    assert [(line.level, line.message.split("\n")[0]) for line in lines] == [
        ("INFO", "step 1 of two"),
        ("INFO", "connecting to postgresql://app:***@db/prod"),
        ("WARNING", "careful: disk is 91% full"),
        ("INFO", "rows copied"),
        ("ERROR", "copy failed at orders"),
        ("INFO", "done in 1.2s"),
    ]
    assert [line.seq for line in lines] == list(range(1, 7))
    assert "ValueError: no such table" in lines[4].message
    shown = made.stderr_lines()
    assert any(
        line.endswith(f"WARNING jobhost.job.{_JOB}: careful: disk is 91% full") for line in shown
    )
    assert any(line.endswith(f"ERROR jobhost.job.{_JOB}: copy failed at orders") for line in shown)
    assert "ValueError: no such table" in made.stderr.getvalue()
    assert not any("step 1" in line or "rows copied" in line or "done in" in line for line in shown)
    # Only the lines stderr shows were records, and they name the job's own code as the caller.
    assert [record.getMessage() for record in made.records] == [
        "careful: disk is 91% full",
        "copy failed at orders",
    ]
    assert {(record.name, record.funcName, record.pathname) for record in made.records} == {
        (f"jobhost.job.{_JOB}", "_job", __file__)
    }


def test_json_stderr_gets_the_lines_it_shows_with_the_run_s_ids(
    host: Callable[[str, str], Host],
) -> None:
    made = host("WARNING", "json")
    lines = made.run("run-json", _job)
    assert len(lines) == 6
    shown = [json.loads(line) for line in made.stderr_lines()]
    assert [(line["level"], line["message"]) for line in shown] == [
        ("WARNING", "careful: disk is 91% full"),
        ("ERROR", "copy failed at orders"),
    ]
    assert all(line["run_id"] == "run-json" and line["job"] == _JOB for line in shown)
    assert "ValueError: no such table" in shown[1]["exception"]


def test_at_info_stderr_shows_every_line_and_the_run_log_keeps_them(
    host: Callable[[str, str], Host],
) -> None:
    made = host("INFO", "text")
    lines = made.run("run-info", _job)
    assert len(lines) == 6
    shown = made.stderr.getvalue()
    for text in ("step 1 of two", "postgresql://app:***@db/prod", "rows copied", "done in 1.2s"):
        assert text in shown
    assert "s3cret" not in shown
    assert len(made.records) == 6
    assert made.records[3].__dict__["rows"] == 3  # extra= reaches the record


def test_a_thread_the_job_starts_still_writes_to_its_run(
    host: Callable[[str, str], Host],
) -> None:
    made = host("WARNING", "json")

    def job(logger: logging.Logger) -> None:
        logger.info("before")
        # A thread of its own (fan_out's pool): no run in its context.
        worker = threading.Thread(
            target=lambda: (logger.info("in a thread"), logger.warning("warned in a thread"))
        )
        worker.start()
        worker.join()
        logger.info("after")

    lines = made.run("run-thread", job)
    assert [line.message for line in lines] == [
        "before",
        "in a thread",
        "warned in a thread",
        "after",
    ]
    (shown,) = [json.loads(line) for line in made.stderr_lines()]
    assert shown["message"] == "warned in a thread" and shown["run_id"] == "run-thread"


def test_levels_and_filters_set_on_the_loggers_are_obeyed(
    host: Callable[[str, str], Host],
) -> None:
    made = host("WARNING", "text")
    registered = logging.getLogger(f"jobhost.job.{_JOB}")
    registered.setLevel(logging.DEBUG)
    try:

        def job(logger: logging.Logger) -> None:
            logger.debug("debug kept: the job's logger is at DEBUG")
            logger.addFilter(lambda record: "skip" not in record.getMessage())
            logger.info("skip me")
            logger.info("kept despite the filter")
            logger.filters.clear()
            logger.setLevel(logging.WARNING)
            logger.info("below the job's own level now")
            logger.warning("still kept")

        lines = made.run("run-levels", job)
    finally:
        registered.setLevel(logging.NOTSET)
    assert [line.message for line in lines] == [
        "debug kept: the job's logger is at DEBUG",
        "kept despite the filter",
        "still kept",
    ]


def test_it_is_a_standard_logger_and_reports_a_bad_format_as_logging_does(
    host: Callable[[str, str], Host],
) -> None:
    made = host("WARNING", "text")

    def job(logger: logging.Logger) -> None:
        assert isinstance(logger, JobLogger) and isinstance(logger, logging.Logger)
        assert logger.name == f"jobhost.job.{_JOB}"
        assert logger.isEnabledFor(logging.INFO) and not logger.isEnabledFor(logging.DEBUG)
        logger.info("%d rows", "many")  # the job's bug: logged as an error, not raised
        logger.getChild("part").info("from a child logger")
        logger.info(ValueError("an object as the message"))

    lines = made.run("run-bad", job)
    assert [line.message for line in lines] == [
        "from a child logger",
        "an object as the message",
    ]
    assert "--- Logging error ---" in made.stderr.getvalue()
    assert "%d format: a real number is required, not str" in made.stderr.getvalue()
