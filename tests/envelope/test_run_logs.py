"""Run logs: what a job writes through ``context.logger`` is kept with its run, bounded and
redacted, on both stores."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from jobhost.catalog import Catalog
from jobhost.clock import SystemClock
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope, SupervisedCancellation
from jobhost.envelope.lifecycle import Outcome
from jobhost.envelope.reporting import Telemetry
from jobhost.envelope.runlog import RunLog, RunLogWriter
from jobhost.firing.tick import Ticker
from jobhost.operations.runs import dropped_text, line_text, read_run_log
from jobhost.records import Claim, Dropped, LogLine
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.actions import request_run
from jobhost.store.runlogs import read_lines, run_logs
from tests.support import run_through, sample_catalog
from tests.waiting import wait_for


class LoggingHost:
    """A store, sample jobs and an envelope that keeps run logs; runs jobs by manual request."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        engine: Engine,
        telemetry: Telemetry,
        flush_seconds: float,
    ) -> None:
        self.catalog = catalog
        self.engine = engine
        self.clock = SystemClock()
        self.ticker = Ticker(
            Store(engine),
            catalog.jobs,
            host_id="test-host",
            lease_duration=timedelta(minutes=1),
            telemetry=telemetry,
        )
        self.ticker.sync(self.clock())
        self.writer = RunLogWriter(
            Store(engine),
            max_lines=settings.run_log_lines,
            max_bytes=settings.run_log_bytes,
            flush_seconds=flush_seconds,
        )
        self.envelope = RunEnvelope(
            Store(engine, self.clock),
            host_id="test-host",
            grace=timedelta(seconds=0.5),
            telemetry=telemetry,
            run_logs=self.writer,
        )

    def claim(self, job: str) -> Claim:
        with self.engine.begin() as connection:
            request_run(connection, job, "tester", "run log test", self.clock())
        ((claim, _spec),) = self.ticker.tick(self.clock(), 1).claims
        return claim

    def run(
        self, job: str, cancellation: SupervisedCancellation | None = None
    ) -> tuple[Outcome, str]:
        claim = self.claim(job)
        spec = self.catalog.jobs[job]
        return run_through(self.envelope, claim, spec, cancellation), claim.run_id

    def entries(self, run_id: str) -> list[LogLine | Dropped]:
        page = read_run_log(Store(self.engine), run_id)
        assert page is not None
        return page.entries

    def stored_rows(self) -> int:
        """Lines in the store (rows hold several)."""
        with reading(self.engine) as connection:
            total = select(func.coalesce(func.sum(run_logs.c.lines), 0))
            return int(connection.execute(total).scalar_one())


@pytest.fixture
def host(
    sample_settings: Callable[..., Settings], telemetry: Any
) -> Iterator[Callable[..., LoggingHost]]:
    made: list[LoggingHost] = []
    # The job loggers' records reach the run log without filling pytest's log capture.
    quiet = logging.getLogger("jobhost.job")
    quiet.propagate = False
    quiet.setLevel(logging.DEBUG)
    captured = [h for h in quiet.handlers if type(h).__name__ == "LogCaptureHandler"]
    for handler in captured:
        quiet.removeHandler(handler)

    def make(jobs: list[dict[str, Any]], flush_seconds: float = 1.0, **values: Any) -> LoggingHost:
        settings = sample_settings([{"cron": "0 3 * * *", **job} for job in jobs], **values)
        engine = create_store_engine(settings.database_url)
        upgrade(engine)
        catalog = sample_catalog(settings)
        made.append(LoggingHost(settings, catalog, engine, telemetry[0], flush_seconds))
        return made[-1]

    yield make
    quiet.propagate = True
    quiet.setLevel(logging.NOTSET)
    for handler in captured:
        quiet.addHandler(handler)
    for item in made:
        item.writer.close()
        item.engine.dispose()


def _messages(entries: list[LogLine | Dropped]) -> list[str]:
    return [e.message if isinstance(e, LogLine) else dropped_text(e) for e in entries]


def test_every_line_is_kept_in_order_with_its_time_and_level(
    host: Callable[..., LoggingHost],
) -> None:
    made = host([{"name": "sample.talk", "behaviour": "log", "lines": 30, "level": "WARNING"}])
    before = time.time()
    outcome, run_id = made.run("sample.talk")
    assert outcome.outcome == "succeeded"
    entries = made.entries(run_id)
    assert _messages(entries) == [f"line {i}" for i in range(1, 31)]
    lines = [e for e in entries if isinstance(e, LogLine)]
    assert [line.seq for line in lines] == list(range(1, 31))
    assert {line.level for line in lines} == {"WARNING"}
    assert all(before - 1 <= line.at.timestamp() <= time.time() + 1 for line in lines)


def test_a_flood_keeps_the_first_and_last_lines_and_counts_the_rest(
    host: Callable[..., LoggingHost],
) -> None:
    # 200,000 lines of 100 characters: 20 MB written, the bounds' worth kept.
    made = host(
        [{"name": "sample.flood", "behaviour": "log", "lines": 200_000, "width": 100}],
    )
    _, run_id = made.run("sample.flood")
    entries = made.entries(run_id)
    lines = [e for e in entries if isinstance(e, LogLine)]
    (gap,) = [e for e in entries if isinstance(e, Dropped)]
    assert len(lines) == 1000
    assert lines[0].message.startswith("line 1.") and lines[499].message.startswith("line 500.")
    assert lines[500].message.startswith("line 199501.")
    assert lines[-1].message.startswith("line 200000.")
    assert entries[500] == gap
    assert gap.lines == 199_000
    assert gap.bytes == 199_000 * 100
    assert dropped_text(gap) == "… 199,000 lines (19.9 MB) dropped …"
    assert made.stored_rows() == 1000
    stored = sum(len(line.message) for line in lines)
    assert stored <= 256 * 1024


def test_the_byte_bound_holds_for_long_lines(host: Callable[..., LoggingHost]) -> None:
    made = host(
        [{"name": "sample.wide", "behaviour": "log", "lines": 300, "width": 1000}],
        run_log_bytes=20_000,
    )
    _, run_id = made.run("sample.wide")
    entries = made.entries(run_id)
    lines = [e for e in entries if isinstance(e, LogLine)]
    (gap,) = [e for e in entries if isinstance(e, Dropped)]
    assert sum(line.size for line in lines) <= 20_000
    assert lines[0].seq == 1 and lines[-1].seq == 300
    assert gap.lines == 300 - len(lines)
    assert gap.bytes == gap.lines * 1000


def test_lines_are_redacted_like_error_messages_and_a_raised_exception_leaves_its_traceback(
    host: Callable[..., LoggingHost],
) -> None:
    made = host(
        [
            {
                "name": "sample.leaky",
                "behaviour": "log",
                "lines": 2,
                "text": "connecting to postgresql://app:s3cret@db/prod, try {i}",
                "raise": "lost postgresql://app:s3cret@db/prod",
            }
        ]
    )
    outcome, run_id = made.run("sample.leaky")
    assert outcome.outcome == "failed"
    entries = made.entries(run_id)
    text = "\n".join(line_text(e) for e in entries)
    assert "s3cret" not in text
    assert "connecting to postgresql://app:***@db/prod, try 1" in text
    last = entries[-1]
    assert isinstance(last, LogLine) and last.level == "ERROR"
    assert last.message.startswith("Traceback (most recent call last):")
    assert last.message.rstrip().endswith("RuntimeError: lost postgresql://app:***@db/prod")


def test_lines_are_written_while_the_run_runs(host: Callable[..., LoggingHost]) -> None:
    made = host(
        [{"name": "sample.slow", "behaviour": "log", "lines": 100, "pause": 0.05}],
        flush_seconds=0.2,
    )
    claim = made.claim("sample.slow")
    cancellation = SupervisedCancellation()
    worker = threading.Thread(
        target=run_through,
        args=(made.envelope, claim, made.catalog.jobs["sample.slow"], cancellation),
    )
    worker.start()
    try:

        def lines_while_running() -> list[LogLine | Dropped] | None:
            page = read_run_log(Store(made.engine), claim.run_id)
            assert page is not None
            return page.entries if page.entries and page.running else None

        seen = wait_for(
            lines_while_running, 20, "a line in the store while the run runs", every=0.05
        )
        assert 0 < len(seen) < 100
    finally:
        cancellation.cancel("test over")
        worker.join(10)


def test_the_tail_follows_the_newest_lines_while_the_run_runs(
    host: Callable[..., LoggingHost],
) -> None:
    # Tail lines written early are replaced as newer ones push them out: the store stays bounded.
    made = host(
        [{"name": "sample.steady", "behaviour": "log", "lines": 60, "pause": 0.02}],
        flush_seconds=0.1,
        run_log_lines=10,
    )
    _, run_id = made.run("sample.steady")
    entries = made.entries(run_id)
    assert _messages(entries) == [
        *(f"line {i}" for i in range(1, 6)),
        "… 50 lines (346 B) dropped …",
        *(f"line {i}" for i in range(56, 61)),
    ]
    assert made.stored_rows() == 10


def test_tailing_after_a_line_number_reads_only_newer_lines(
    host: Callable[..., LoggingHost],
) -> None:
    made = host([{"name": "sample.talk", "behaviour": "log", "lines": 20}], run_log_lines=10)
    _, run_id = made.run("sample.talk")
    page = read_run_log(Store(made.engine), run_id, after=3)
    assert page is not None
    assert _messages(page.entries) == [
        "line 4",
        "line 5",
        "… 10 lines (66 B) dropped …",
        *(f"line {i}" for i in range(16, 21)),
    ]
    assert page.next_after == 20
    later = read_run_log(Store(made.engine), run_id, after=page.next_after)
    assert later is not None and later.entries == []
    assert read_run_log(Store(made.engine), "no-such-run") is None


def test_a_buffer_past_its_bounds_costs_no_more_memory() -> None:
    run_log = RunLog("r", "sample.flood", 1, max_lines=10, max_bytes=10_000)
    for index in range(100_000):
        run_log.add(0.0, "INFO", f"line {index}")
    batch = run_log.take()
    assert [raw.seq for raw in batch.head] == [1, 2, 3, 4, 5]
    assert [raw.seq for raw in batch.tail] == list(range(99_996, 100_001))


def test_a_stored_row_the_tail_slides_over_is_rewritten_with_only_its_kept_lines(
    host: Callable[..., LoggingHost],
) -> None:
    engine = host([{"name": "sample.talk", "behaviour": "log", "lines": 1}]).engine
    writer = RunLogWriter(Store(engine), max_lines=10, max_bytes=100_000, flush_seconds=3600)
    run_log = writer.open("slide", "sample.talk", 1)
    try:
        for flush in range(4):
            for index in range(flush * 4 + 1, flush * 4 + 5):
                run_log.add(0.0, "INFO", f"line {index}")
            # Each flush stores the new tail lines as one row; the next slides over part of it.
            writer._flush_open()
            with reading(engine) as connection:
                entries = read_lines(connection, "slide")
            last = flush * 4 + 4
            tail = range(max(6, last - 4), last + 1)
            expected = [f"line {i}" for i in range(1, min(last, 5) + 1)]
            if tail.start > 6:
                gone = [f"line {i}" for i in range(6, tail.start)]
                expected.append(dropped_text(Dropped(len(gone), sum(map(len, gone)))))
            assert _messages(entries) == [*expected, *(f"line {i}" for i in tail)]
    finally:
        writer.close()
    with reading(engine) as connection:
        stored = select(func.coalesce(func.sum(run_logs.c.lines), 0))
        assert connection.execute(stored).scalar_one() == 10
