"""The backfill section of ``benchmarks/scale.py``: does a backfill make scheduled runs late?

One host with ``--backfill-jobs`` every-second jobs (100) is measured twice per store, for
``--instants`` seconds each: alone, then with a backfill of ``--backfill-occurrences`` (500)
past nights of the extra job ``bench.backfill`` at ``--backfill-concurrency`` (4), started by
``jobhost backfill ... --no-wait`` (a process of its own, as an operator would) as the window
opens. Printed side by side: the scheduled runs' lag p50/p99/max, misses and duplicates, the
host's SQL statements per scheduled fire, and the backfill runs done in the window and by the end
of the drain. The promise measured: beside a backfill no scheduled run is later than the usual
p99 of the host alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from _scale_measure import Outcome, Window, jobhost_launch, measure, number, percentile, read_fires
from _scale_system import Children, Postgres

__all__ = ["BACKFILL_JOB", "backfill_command", "backfill_section"]

BACKFILL_JOB = "bench.backfill"
"""The extra job a backfill replays, beside the scheduled ones."""


class _Bench(Protocol):
    """What this section uses of the bench ``scale.py`` sets up."""

    arguments: argparse.Namespace
    children: Children
    postgres: Postgres | None

    @property
    def window(self) -> Window: ...

    def directory(self, label: str) -> Path: ...

    def store(self, store: str, directory: Path, name: str) -> tuple[str, str]: ...


def backfill_section(bench: _Bench) -> None:
    a = bench.arguments
    print(
        f"\n== backfill: {a.backfill_jobs} jobs every 1s, {a.instants} instants, alone and "
        f"beside a backfill of {a.backfill_occurrences} past nights of {BACKFILL_JOB} at "
        f"concurrency {a.backfill_concurrency} (started by `jobhost backfill --no-wait` as the "
        "window opens) =="
    )
    print(
        "lag = ledger started_at - occurrence of the scheduled runs due in the window; "
        "SQL/fire = the host's statements over the window per scheduled fire in it; "
        "bf window = backfill runs done in the window, bf end = by the end of the drain; "
        "bf 1st = seconds from the command's start to the first backfill run"
    )
    print(
        f"{'store':<8} {'backfill':<8} {'fires':>6} {'misses':>6} {'dups':>5} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8} {'SQL/fire':>8} {'CPU/1k':>7} {'bf window':>9} "
        f"{'bf end':>6} {'bf 1st':>7}"
    )
    stores = [store for store in a.stores if store in {"sqlite", "postgres"}] or ["sqlite"]
    for store in stores:
        alone = _run(bench, store, backfill=False)
        beside = _run(bench, store, backfill=True)
        if alone.started and beside.started:
            usual = percentile(alone.lags, 99)
            late = sum(1 for lag in beside.lags if lag > usual)
            print(
                f"{store:<8} beside a backfill: max {number(max(beside.lags), 1, 1)} ms vs the "
                f"usual p99 {number(usual, 1, 1)} ms; {late} of {len(beside.lags)} scheduled "
                "runs later than that p99",
                flush=True,
            )


def _run(bench: _Bench, store: str, *, backfill: bool) -> Outcome:
    a = bench.arguments
    label = "with" if backfill else "alone"
    directory = bench.directory(f"backfill-{store}-{label}")
    url, application = bench.store(store, directory, "jobhost")
    launch = jobhost_launch(directory, url, a.backfill_jobs, "every-second", backfill_job=True)
    opened: list[float] = []

    def start_backfill() -> None:
        opened.append(time.time())
        if backfill:
            bench.children.start(
                backfill_command(launch.argv, a.backfill_occurrences, a.backfill_concurrency),
                launch.env,
                directory / "cli.out",
            )

    outcome = measure(
        bench.children,
        [launch],
        directory,
        bench.window,
        a.backfill_jobs,
        ledger_url=url,
        postgres=bench.postgres if application else None,
        application=application,
        at_open=start_backfill,
    )
    if not outcome.started:
        print(f"{store:<8} {label:<8} no fire before the start-up timeout or exit", flush=True)
        if outcome.note:
            print(f"      its last words: {outcome.note}")
        return outcome
    replays = [observed for _, job, _, observed in read_fires(directory) if job == BACKFILL_JOB]
    opens = opened[0] if opened else float("nan")
    closes = opens + a.instants
    in_window = sum(1 for observed in replays if observed < closes)
    scheduled = outcome.fires_in_window - in_window
    statements = (
        f"{outcome.statements / scheduled:>8.1f}"
        if outcome.statements is not None and scheduled
        else f"{'-':>8}"
    )
    first = min(replays) - opens if replays else None
    duplicates = max(outcome.duplicates, outcome.ledger_duplicates or 0)
    print(
        f"{store:<8} {label:<8} {outcome.ran:>6} {outcome.misses:>6} {duplicates:>5} "
        f"{number(percentile(outcome.lags, 50), 8, 1)} "
        f"{number(percentile(outcome.lags, 99), 8, 1)} "
        f"{number(max(outcome.lags, default=float('nan')), 8, 1)} {statements} "
        f"{number(outcome.cpu / scheduled * 1000 if scheduled else None, 7, 2)} "
        f"{in_window if backfill else '-':>9} {len(replays) if backfill else '-':>6} "
        f"{number(first, 6, 2) + 's' if backfill else '-':>7}",
        flush=True,
    )
    if backfill and len(replays) < a.backfill_occurrences:
        print(f"      the command said: {_tail(directory / 'cli.out')}", flush=True)
    return outcome


def backfill_command(host_argv: list[str], nights: int, concurrency: int) -> list[str]:
    """``jobhost --config ... backfill bench.backfill`` over the last ``nights`` nights, mode
    ``all`` at ``concurrency``, not waiting; the host's own settings from ``host_argv``."""
    config = host_argv[host_argv.index("--config") + 1]
    today = datetime.now(UTC).date()
    start = today - timedelta(days=nights)
    return [
        sys.executable,
        "-m",
        "jobhost",
        "--config",
        config,
        "backfill",
        BACKFILL_JOB,
        "--from",
        start.isoformat(),
        "--to",
        today.isoformat(),
        "--mode",
        "all",
        "--concurrency",
        str(concurrency),
        "--reason",
        "benchmark",
        "--no-wait",
    ]


def _tail(output: Path) -> str:
    try:
        lines = output.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-3:])
