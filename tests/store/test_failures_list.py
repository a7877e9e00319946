"""Failures across jobs, read by index a page at a time, on both stores: the order, the keyset
pages, the filters, the bounded text search, the streaks, stuck runs and the outcome counts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from jobhost.operations.failures import FailureQuery, decode_cursor, read_failures
from jobhost.records import FailureFilter
from jobhost.store import Store, reading
from jobhost.store import failures as failures_module
from jobhost.store.failures import failure_page, failure_streaks
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.schema import runs

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _run(
    engine: Engine,
    job: str,
    outcome: str,
    finished: datetime | None,
    *,
    error_type: str | None = None,
    error: str | None = None,
    attempt: int = 1,
    lease: datetime | None = None,
    started: datetime | None = None,
) -> str:
    made = uuid.uuid4().hex
    started = started or (finished or T0) - timedelta(seconds=3)
    with engine.begin() as connection:
        connection.execute(
            runs.insert().values(
                id=made,
                job_name=job,
                occurrence=None,
                attempt=attempt,
                source="schedule",
                outcome=outcome,
                host_id="replica-0",
                queued_at=started,
                started_at=started,
                finished_at=finished,
                lease_expires_at=lease,
                error_type=error_type,
                error_message=error,
            )
        )
    return made


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_failed_runs_of_every_job_newest_first_in_pages_that_never_repeat(
    engine: Engine,
) -> None:
    expected = [
        _run(engine, "a.one", "failed", _at(1), error_type="Failure", error="disk full"),
        _run(engine, "b.two", "timed_out", _at(2), error_type="TimeoutError"),
        _run(engine, "a.one", "abandoned", _at(3), error="lease expired"),
    ]
    # Three failures of three outcomes finished at one instant: the run id breaks the tie.
    tied = sorted(
        [
            _run(engine, "c.three", outcome, _at(4), error_type="X")
            for outcome in ("failed", "timed_out", "abandoned")
        ]
    )
    expected += tied
    expected.append(_run(engine, "b.two", "failed", _at(5), error_type="ValueError"))
    for outcome in ("succeeded", "cancelled", "missed", "skipped"):
        _run(engine, "a.one", outcome, _at(6))
    _run(engine, "a.one", "running", None, lease=_at(100))
    newest_first = expected[::-1]

    with reading(engine) as connection:
        whole = failure_page(connection, limit=100)
        assert [run.id for run in whole.runs] == newest_first
        assert whole.next_key is None and whole.searched_to is None
        paged: list[str] = []
        after = None
        for _ in range(10):
            page = failure_page(connection, limit=2, after=after)
            paged += [run.id for run in page.runs]
            if page.next_key is None:
                break
            after = page.next_key
    assert paged == newest_first

    with reading(engine) as connection:
        one_job = failure_page(connection, limit=100, where=FailureFilter(jobs=["b.two"]))
        recent = failure_page(connection, limit=100, where=FailureFilter(since=_at(4)))
    assert [run.id for run in one_job.runs] == [expected[-1], expected[1]]
    assert [run.id for run in recent.runs] == newest_first[:4]


def test_a_search_by_error_text_ignores_case_and_takes_wildcards_literally(
    engine: Engine,
) -> None:
    http = _run(engine, "a.one", "failed", _at(1), error_type="HTTPError", error="got 503 back")
    type_only = _run(engine, "a.one", "failed", _at(2), error_type="Status503")
    _run(engine, "a.one", "failed", _at(3), error="got 500 back")
    percent = _run(engine, "b.two", "timed_out", _at(4), error="disk 100% full")
    _run(engine, "b.two", "timed_out", _at(5), error="disk 1000 full")
    _run(engine, "b.two", "succeeded", _at(6), error="503 but it worked")

    with reading(engine) as connection:
        found = failure_page(connection, limit=10, where=FailureFilter(text="503"))
        upper = failure_page(connection, limit=10, where=FailureFilter(text="HTTPERROR"))
        literal = failure_page(connection, limit=10, where=FailureFilter(text="100%"))
        underscore = failure_page(connection, limit=10, where=FailureFilter(text="disk_1"))
    assert [run.id for run in found.runs] == [type_only, http]
    assert [run.id for run in upper.runs] == [http]
    assert [run.id for run in literal.runs] == [percent]
    assert underscore.runs == []


def test_a_search_looks_at_a_bounded_number_of_rows_per_page_and_goes_on_from_there(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(failures_module, "SEARCH_SCAN", 3)
    old_match = _run(engine, "a.one", "failed", _at(1), error="quota exceeded")
    for minute in range(2, 9):
        _run(engine, "a.one", "failed", _at(minute), error="connection reset")
    new_match = _run(engine, "a.one", "timed_out", _at(9), error="Quota Exceeded again")

    with reading(engine) as connection:
        first = failure_page(connection, limit=5, where=FailureFilter(text="quota"))
        assert [run.id for run in first.runs] == [new_match]
        # It looked at the newest three failed runs: minutes 8, 7 and 6.
        assert first.searched_to is not None and first.searched_to.finished_at == _at(6)
        assert first.next_key == first.searched_to
        found: list[str] = []
        after = first.next_key
        for _ in range(5):
            page = failure_page(connection, limit=5, where=FailureFilter(text="quota"), after=after)
            found += [run.id for run in page.runs]
            if page.next_key is None:
                break
            after = page.next_key
    assert found == [old_match]


def test_streaks_count_failed_attempts_in_a_row_from_the_newest(engine: Engine) -> None:
    _run(engine, "a.one", "succeeded", _at(1))
    _run(engine, "a.one", "failed", _at(2))
    _run(engine, "a.one", "timed_out", _at(3))
    _run(engine, "a.one", "missed", _at(4), attempt=0)  # not an attempt: it does not break it
    _run(engine, "a.one", "abandoned", _at(5))
    _run(engine, "b.two", "failed", _at(1))
    _run(engine, "b.two", "succeeded", _at(2))
    statements: list[str] = []

    def count(*args: object) -> None:
        if str(args[2]).startswith("SELECT"):
            statements.append(str(args[2]))

    with reading(engine) as connection:
        event.listen(engine, "before_cursor_execute", count)
        try:
            streaks = failure_streaks(connection, ["a.one", "b.two", "c.never"])
        finally:
            event.remove(engine, "before_cursor_execute", count)
    assert streaks == {"a.one": 3, "b.two": 0, "c.never": 0}
    assert len(statements) == 1  # the page's jobs in one statement


def test_stuck_runs_come_first_then_failures_with_each_jobs_streak(engine: Engine) -> None:
    # PostgreSQL judges leases by its own clock: these times are relative to the real one.
    now = datetime.now(UTC)
    expired = _run(
        engine,
        "a.one",
        "running",
        None,
        started=now - timedelta(minutes=20),
        lease=now - timedelta(minutes=1),
    )
    ignored = _run(
        engine,
        "b.two",
        "running",
        None,
        started=now - timedelta(minutes=10),
        lease=now + timedelta(minutes=5),
        error_type="Stuck",
        error="stuck: it ignored its cancellation",
    )
    healthy = now + timedelta(minutes=5)
    _run(engine, "c.three", "running", None, started=now, lease=healthy)
    failed = _run(engine, "a.one", "failed", now - timedelta(hours=1), error="boom\nsecond")

    found = read_failures(Store(engine, lambda: now), FailureQuery(limit=10))
    assert [(row.run.id, row.outcome) for row in found.failures] == [
        (ignored, "stuck"),
        (expired, "stuck"),
        (failed, "failed"),
    ]
    assert [row.streak for row in found.failures] == [0, 1, 1]
    assert found.failures[2].first_line == "boom"

    # A first page filled by stuck runs leads to the finished failures.
    two = read_failures(Store(engine, lambda: now), FailureQuery(limit=2))
    assert [row.outcome for row in two.failures] == ["stuck", "stuck"]
    assert two.next_cursor is not None
    rest = read_failures(
        Store(engine, lambda: now), FailureQuery(limit=2, cursor=decode_cursor(two.next_cursor))
    )
    assert [row.run.id for row in rest.failures] == [failed]
    assert rest.next_cursor is None


def test_runs_by_outcome_are_counted_per_slice(engine: Engine) -> None:
    _run(engine, "a.one", "succeeded", _at(1))
    _run(engine, "a.one", "succeeded", _at(2))
    _run(engine, "a.one", "failed", _at(2))
    _run(engine, "b.two", "missed", _at(35), attempt=0)
    _run(engine, "b.two", "succeeded", _at(59))
    _run(engine, "b.two", "succeeded", _at(60))  # the window's end is not in it
    _run(engine, "b.two", "running", None, lease=_at(90))
    with reading(engine) as connection:
        every = outcome_counts(connection, T0, _at(60), 4)
        one = outcome_counts(connection, T0, _at(60), 4, job="b.two")
    assert every == [{"succeeded": 2, "failed": 1}, {}, {"missed": 1}, {"succeeded": 1}]
    assert one == [{}, {}, {"missed": 1}, {"succeeded": 1}]
