"""The report's reads by index give what a plain read of the ledger gives, on both stores."""

from __future__ import annotations

import gc
import re
import sys
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection

from jobhost.operations.report import JobReport, build_report, report_from
from jobhost.records import RECENT
from jobhost.store import Store, reading
from jobhost.store.reports import ledger_summaries, newest_outcomes, newest_runs
from jobhost.store.snapshot import read_snapshot
from tests.cli.operator_support import Operator, now


def test_newest_rows_last_attempt_and_last_success_per_job(operator: Operator) -> None:
    operator.configure(
        [
            {"name": "sample.busy", "interval": "1h"},
            {"name": "sample.paused", "interval": "1h"},
            {"name": "sample.quiet", "interval": "1h"},
            {"name": "sample.never-synced", "interval": "1h"},
        ]
    )
    operator.sync(leave_out=["sample.never-synced"])
    t = now()
    for hours in range(10, 0, -1):
        outcome = "failed" if hours == 2 else "succeeded"
        operator.add_run("sample.busy", outcome, started=t - timedelta(hours=hours))
    operator.add_run("sample.busy", "pending", started=t)  # a queued retry is not shown
    # Two attempts at one occurrence started at the same instant: the later attempt is newer.
    same = t - timedelta(minutes=30)
    operator.add_run("sample.busy", "failed", started=same, occurrence=same, attempt=1)
    operator.add_run("sample.busy", "succeeded", started=same, occurrence=same, attempt=2)
    operator.add_run("sample.paused", "succeeded", started=t - timedelta(days=2))
    for hours in range(RECENT + 2, 0, -1):
        operator.add_run(
            "sample.paused",
            "missed",
            started=t - timedelta(hours=hours),
            occurrence=t - timedelta(hours=hours),
        )
    operator.add_run("sample.never-synced", "failed", started=t - timedelta(minutes=5))

    with reading(operator.engine) as connection:
        every = ledger_summaries(connection)
        one = ledger_summaries(connection, ["sample.busy", "sample.never-synced"])
        lean = ledger_summaries(connection, recent=False)
    assert set(every) == {"sample.busy", "sample.paused", "sample.quiet"}
    busy = every["sample.busy"]
    assert busy.recent_outcomes == ["succeeded", "failed", "succeeded", "failed", "succeeded"]
    # The second attempt at the shared instant (the one that succeeded) is the last attempt.
    assert busy.last_attempt is not None
    assert (busy.last_attempt.started_at, busy.last_attempt.outcome) == (same, "succeeded")
    assert busy.last_success is not None and busy.last_success > same
    assert one["sample.busy"] == busy

    paused = every["sample.paused"]
    assert paused.recent_outcomes == ["missed"] * RECENT
    # Beyond the newest rows, all missed: the last attempt is found further back.
    assert paused.last_attempt is not None and paused.last_attempt.outcome == "succeeded"
    assert every["sample.quiet"].recent_outcomes == []
    assert every["sample.quiet"].last_attempt is None
    assert one["sample.never-synced"].recent_outcomes == ["failed"]
    assert one["sample.never-synced"].last_success is None
    # Without the newest outcomes, the same last attempts (found as far back) and successes.
    assert {name: replace(summary, recent_outcomes=[]) for name, summary in every.items()} == lean

    snapshot = read_snapshot(operator.engine, ["sample.never-synced"])
    assert snapshot.last_runs["sample.never-synced"].outcome == "failed"
    only = read_snapshot(operator.engine, only="sample.busy")
    assert set(only.schedules) == {"sample.busy"}
    assert only.recent_outcomes["sample.busy"] == busy.recent_outcomes


def test_a_report_reading_its_ledger_apart_says_what_one_connection_says(
    operator: Operator,
) -> None:
    operator.configure(
        [
            {"name": "sample.busy", "interval": "1h", "critical": True},
            {"name": "sample.paused", "interval": "1h"},
            {"name": "sample.quiet", "interval": "1h"},
        ]
    )
    operator.sync()
    t = now()
    for hours in range(8, 0, -1):
        outcome = "failed" if hours % 3 == 0 else "succeeded"
        operator.add_run("sample.busy", outcome, started=t - timedelta(hours=hours), error="x")
    for hours in range(RECENT + 2, 0, -1):
        at = t - timedelta(hours=hours)
        operator.add_run("sample.paused", "missed", started=at, occurrence=at)
    operator.add_run("sample.paused", "succeeded", started=t - timedelta(days=2))
    settings = operator.settings

    for recent in (True, False):
        together = build_report(settings, None, Store(operator.engine), recent=recent)
        apart = build_report(settings, None, Store(operator.engine), recent=recent, apart=True)
        assert replace(apart, generated_at=together.generated_at) == together
    busy = next(job for job in apart.jobs if job.name == "sample.busy")
    assert busy.last_run is not None and busy.last_run.outcome == "succeeded"
    assert together.jobs != [] and all(job.recent_outcomes == [] for job in together.jobs)
    full = build_report(settings, None, Store(operator.engine), apart=True)
    assert [job.recent_outcomes for job in full.jobs if job.name == "sample.paused"] == [
        ["missed"] * RECENT
    ]


def test_each_jobs_newest_outcomes_follow_the_ledgers_order_whatever_the_order_rows_came_in(
    operator: Operator,
) -> None:
    # The whole catalog's newest outcomes are one text per job on SQLite: the rows must reach
    # it newest first, not in the order they were written, ties broken by occurrence then
    # attempt, rows without an occurrence after the others.
    operator.configure(
        [{"name": "sample.a", "interval": "1h"}, {"name": "sample.b", "interval": "1h"}]
    )
    operator.sync()
    t = now()
    tie = t - timedelta(minutes=90)
    rows = [
        ("sample.a", "succeeded", t - timedelta(hours=5), None, 1),
        ("sample.a", "timed_out", tie, tie - timedelta(hours=1), 1),
        ("sample.a", "abandoned", t - timedelta(hours=1), None, 1),
        ("sample.a", "failed", tie, tie, 2),
        ("sample.a", "running", t - timedelta(minutes=1), None, 1),
        ("sample.a", "succeeded", tie, tie, 1),
        ("sample.a", "failed", tie, None, 1),
        ("sample.a", "cancelled", t - timedelta(hours=9), None, 1),
        ("sample.b", "failed", t - timedelta(hours=3), None, 1),
        ("sample.b", "succeeded", t - timedelta(hours=4), None, 1),
    ]
    for job, outcome, started, occurrence, attempt in reversed(rows):
        operator.add_run(job, outcome, started=started, occurrence=occurrence, attempt=attempt)
    operator.add_run("sample.a", "pending", started=t)

    with reading(operator.engine) as connection:
        one_by_one = {
            job: [run.outcome for run in newest_runs(connection, job)]
            for job in ("sample.a", "sample.b")
        }
        summaries = ledger_summaries(connection)
        outcomes = newest_outcomes(connection)
    assert one_by_one["sample.a"] == ["running", "abandoned", "failed", "succeeded", "timed_out"]
    assert {job: summary.recent_outcomes for job, summary in summaries.items()} == one_by_one
    assert outcomes == one_by_one


def test_a_report_and_its_json_are_built_without_a_collection_and_leave_the_collector_on(
    operator: Operator,
) -> None:
    operator.configure([{"name": f"sample.job-{i:02}", "interval": "1h"} for i in range(40)])
    operator.sync()
    t = now()
    for i in range(40):
        operator.add_run(f"sample.job-{i:02}", "succeeded", started=t - timedelta(hours=1))
    # What a report and its JSON call once the collector is paused: a collection started with
    # one of them on the stack ran while the report was being built.
    building = {function.__code__ for function in (read_snapshot, report_from, JobReport.to_json)}
    inside: list[str] = []

    def note(phase: str, _info: dict[str, int]) -> None:
        frame = sys._getframe(1)
        while phase == "start" and frame is not None:
            if frame.f_code in building:
                inside.append(frame.f_code.co_name)
                return
            frame = frame.f_back

    threshold = gc.get_threshold()
    gc.set_threshold(1)  # with the collector on, a collection at every allocation
    gc.callbacks.append(note)
    try:
        for catalog in (None, operator.catalog()):
            for apart in (False, True):
                report = build_report(
                    operator.settings, catalog, Store(operator.engine), apart=apart
                )
                assert len(report.to_json()["jobs"]) == 40
                assert gc.isenabled()
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*threshold)
    assert inside == []


def test_the_whole_catalogs_read_probes_each_jobs_rows_and_never_scans_the_ledger(
    operator: Operator,
) -> None:
    # Each job's last attempt is the run its schedule row names, found by its id; its newest
    # outcomes are the head of its own index: the read's cost follows the jobs, not the ledger.
    operator.configure([{"name": f"sample.job-{i}", "interval": "1h"} for i in range(3)])
    operator.sync()
    for i in range(3):
        operator.add_run(f"sample.job-{i}", "failed", started=now(), error="boom")
    seen: list[tuple[str, Any]] = []

    def note(*args: Any) -> None:
        if args[2].lstrip().upper().startswith("SELECT"):
            seen.append((args[2], args[3]))

    with reading(operator.engine) as connection:
        event.listen(connection, "before_cursor_execute", note)
        summaries = ledger_summaries(connection)
        event.remove(connection, "before_cursor_execute", note)
        assert len(seen) == 1  # one statement for the whole catalog
        plan = _plan(connection, *seen[0])
    assert {s.last_attempt.host_id for s in summaries.values() if s.last_attempt} == {"replica-0"}
    if operator.engine.dialect.name == "sqlite":
        assert "SEARCH runs USING INDEX sqlite_autoindex_runs_1 (id=?)" in plan, plan
        assert "SEARCH inner_runs USING INDEX ix_runs_job_name_newest (job_name=?)" in plan, plan
        assert "SCAN runs" not in plan and "SCAN inner_runs" not in plan, plan
    else:
        # A plain join is planned as a hash over the whole ledger once it holds a million
        # rows (not at a test's few): the probe must sit under its own LIMIT, one per job.
        probe = r"Limit .*\n\s*->  Index Scan using pk_runs on runs .*\n\s*Index Cond: \(\(id\)"
        assert re.search(probe, plan), plan
        assert "Seq Scan on runs" not in plan and "Hash" not in plan, plan


def _plan(connection: Connection, statement: str, parameters: Any) -> str:
    """The plan of ``statement``; on PostgreSQL with the table scan priced out (a test's few
    rows would otherwise be read whole, whatever the statement)."""
    if connection.dialect.name == "sqlite":
        found = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return "\n".join(str(row[-1]) for row in found)
    connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    found = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters)
    return "\n".join(str(row[0]) for row in found)
