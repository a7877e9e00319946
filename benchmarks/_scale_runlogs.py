"""The runlogs section of ``benchmarks/scale.py``: what keeping run logs costs a busy host.

N jobs every second (``--log-jobs``, 100), each run writing ``--log-lines`` lines (20) of about
100 characters through ``context.logger`` at INFO, beside the same N jobs writing none; both
hosts at ``--log-level`` (WARNING, as the scale section: the lines are kept as run logs and not
printed; INFO prints them on stderr too). Printed per store: fires, lag p50/p99, CPU seconds per
1,000 fires of the host process, and the ratios of the run with lines to the run without.
"""

from __future__ import annotations

import argparse
import math
from typing import Protocol

from _scale_measure import Outcome, number, percentile

__all__ = ["runlogs_section"]


class _Bench(Protocol):
    """What this section uses of the bench ``scale.py`` sets up."""

    arguments: argparse.Namespace

    def jobhost(
        self,
        store: str,
        jobs: int,
        replicas: int = 1,
        *,
        log_level: str = "WARNING",
        log_lines: int = 0,
    ) -> Outcome: ...


def runlogs_section(bench: _Bench) -> None:
    a = bench.arguments
    print(
        f"\n== runlogs: {a.log_jobs} jobs every 1s writing {a.log_lines} lines each vs none, "
        f"{a.instants} instants, log_level {a.log_level} =="
    )
    print(
        "CPU/1k = the host process's CPU seconds per 1,000 fires (its PostgreSQL backends in "
        "PG CPU); ratio = with lines / without"
    )
    print(
        f"{'store':<8} {'lines':>5} {'fires':>6} {'misses':>6} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'CPU/1k':>7} {'PG CPU':>7}"
    )
    stores = [store for store in a.stores if store in {"sqlite", "postgres"}] or ["sqlite"]
    for store in stores:
        quiet = _row(bench, store, 0)
        chatty = _row(bench, store, a.log_lines)
        if quiet.started and chatty.started:
            print(
                f"{store:<8} ratio: CPU/1k {_ratio(chatty.cpu_per_1k, quiet.cpu_per_1k)}, "
                f"p50 {_ratio(percentile(chatty.lags, 50), percentile(quiet.lags, 50))}, "
                f"p99 {_ratio(percentile(chatty.lags, 99), percentile(quiet.lags, 99))}",
                flush=True,
            )


def _row(bench: _Bench, store: str, lines: int) -> Outcome:
    a = bench.arguments
    outcome = bench.jobhost(store, a.log_jobs, log_level=a.log_level, log_lines=lines)
    if not outcome.started:
        print(f"{store:<8} {lines:>5} no fire before the start-up timeout or exit", flush=True)
        return outcome
    print(
        f"{store:<8} {lines:>5} {outcome.ran:>6} {outcome.misses:>6} "
        f"{number(percentile(outcome.lags, 50), 8, 1)} "
        f"{number(percentile(outcome.lags, 99), 8, 1)} {number(outcome.cpu_per_1k, 7, 2)} "
        f"{number(outcome.backend_cpu, 7, 2)}",
        flush=True,
    )
    return outcome


def _ratio(ours: float, theirs: float) -> str:
    if math.isnan(ours) or math.isnan(theirs) or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}x"
