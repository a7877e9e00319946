"""The firing engine at scale, beside APScheduler 3: ``python benchmarks/scale.py``.

Drives real processes only: ``jobhost run`` (through ``_scale_host.py``, which counts SQL) with
the jobs of ``_scale_plugin.py``, and APScheduler's BackgroundScheduler in a process of its own
(``_scale_apscheduler.py``), one after the other, in the same invocation. Sections:

- ``scale``: N jobs each firing every second, measured over ``--instants`` whole seconds after
  the first fire and a warm-up; lag p50/p95/p99/max, misses, CPU seconds per 1,000 fires of the
  scheduling process, its PostgreSQL backends' CPU, SQL statements per fire, peak RSS, and the
  jobhost/APScheduler ratios. jobhost has no memory store: APScheduler's MemoryJobStore is
  compared with jobhost on SQLite.
- ``replicas``: K jobhost processes on one PostgreSQL database: fires/s together, duplicates.
- ``startup``: 10,000 declared jobs; spawn to first fire on an empty store and on restart.
- ``idle``: one nightly job; loop turns (statement bursts per thread), statements, CPU.
- ``runlogs``: N jobs every second writing ``--log-lines`` lines each through their logger,
  beside the same jobs writing none (both at ``--log-level``; the lines kept as run logs):
  CPU per 1,000 fires and lag, and their ratios.
- ``backfill``: ``--backfill-jobs`` jobs every second (100) alone, then beside a backfill of
  ``--backfill-occurrences`` (500) past nights of one extra job at ``--backfill-concurrency``
  (4) started mid-run by ``jobhost backfill``: scheduled lag p99/max, misses, duplicates, SQL
  per fire and the backfill runs done, side by side.

Everything is printed, nothing asserted. Each PostgreSQL run has a database of its own on the
server of ``--postgres-url``, dropped at the end, as are all processes, even on Ctrl-C.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from _scale_backfill import backfill_section
from _scale_measure import (
    HERE,
    Launch,
    Outcome,
    Window,
    jobhost_launch,
    measure,
    number,
    percentile,
)
from _scale_runlogs import runlogs_section
from _scale_sections import idle_section, replicas_section, startup_section
from _scale_system import Children, Postgres, machine

SECTIONS = ("scale", "replicas", "startup", "idle", "runlogs", "backfill")
STORES = ("memory", "sqlite", "postgres")
_DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass
class Bench:
    """What every section shares: processes, PostgreSQL databases, scratch space, settings."""

    arguments: argparse.Namespace
    root: Path
    children: Children = field(default_factory=Children)
    postgres: Postgres | None = None

    @property
    def window(self) -> Window:
        a = self.arguments
        return Window(a.instants, a.warmup, a.start_timeout, a.drain)

    def directory(self, label: str) -> Path:
        path = self.root / f"{label}-{uuid.uuid4().hex[:6]}"
        path.mkdir()
        return path

    def store(self, store: str, directory: Path, name: str) -> tuple[str, str]:
        """A fresh store's URL and the PostgreSQL application name of its connections."""
        if store == "postgres":
            if self.postgres is None:
                self.postgres = Postgres(self.arguments.postgres_url)
            application = f"bench-{uuid.uuid4().hex[:8]}"
            return self.postgres.create(application), application
        return f"sqlite:///{directory}/{name}.db", ""

    def jobhost(
        self,
        store: str,
        jobs: int,
        replicas: int = 1,
        *,
        log_level: str = "WARNING",
        log_lines: int = 0,
    ) -> Outcome:
        directory = self.directory(f"jobhost-{store}-{jobs}")
        url, application = self.store(store, directory, "jobhost")
        launches = [
            jobhost_launch(
                directory,
                url,
                jobs,
                "every-second",
                name=f"host{index}",
                log_level=log_level,
                log_lines=log_lines,
            )
            for index in range(replicas)
        ]
        return self._measure(launches, directory, jobs, url, application, ledger=True)

    def apscheduler(self, store: str, jobs: int) -> Outcome:
        directory = self.directory(f"aps-{store}-{jobs}")
        url, application = (
            ("memory", "") if store == "memory" else self.store(store, directory, "apscheduler")
        )
        argv = [sys.executable, str(HERE / "_scale_apscheduler.py"), url, str(jobs), str(directory)]
        launch = Launch(argv, dict(os.environ), directory / "apscheduler.out")
        return self._measure([launch], directory, jobs, url, application, ledger=False)

    def _measure(
        self,
        launches: list[Launch],
        directory: Path,
        jobs: int,
        url: str,
        application: str,
        *,
        ledger: bool,
    ) -> Outcome:
        return measure(
            self.children,
            launches,
            directory,
            self.window,
            jobs,
            ledger_url=url if ledger else None,
            postgres=self.postgres if application else None,
            application=application,
        )


def main() -> None:
    arguments = _arguments()
    signal.signal(signal.SIGTERM, _interrupt)
    with tempfile.TemporaryDirectory(prefix="jobhost-bench-") as root:
        bench = Bench(arguments, Path(root))
        try:
            _print_machine(bench)
            if "scale" in arguments.sections:
                scale_section(bench)
            if "replicas" in arguments.sections:
                replicas_section(bench)
            if "startup" in arguments.sections:
                startup_section(bench)
            if "idle" in arguments.sections:
                idle_section(bench)
            if "runlogs" in arguments.sections:
                runlogs_section(bench)
            if "backfill" in arguments.sections:
                backfill_section(bench)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping the processes and dropping the databases", flush=True)
        finally:
            bench.children.stop_all()
            if bench.postgres is not None:
                bench.postgres.drop_all()
                bench.postgres.engine.dispose()


def scale_section(bench: Bench) -> None:
    a = bench.arguments
    print(
        f"\n== scale: N jobs each every 1s, {a.instants} instants measured after the first fire "
        f"and {a.warmup:g}s warm-up =="
    )
    print(
        "lag: jobhost = ledger started_at - occurrence; APScheduler = EVENT_JOB_EXECUTED time - "
        "scheduled_run_time (the no-op's end); 'exec p99' = the executor's own clock - "
        "occurrence. CPU = utime+stime of the scheduling process(es) over the window, per 1,000 "
        "fires in it; PG CPU = its PostgreSQL backends over the window (s); misses = occurrences "
        "due in the window that did not run by the end of the drain; dups = occurrences run more "
        "than once, as the executors logged them (jobhost: or started twice in the ledger); "
        "'recorded' = missed/skipped "
        "rows or events for them; CPU is read in 10 ms clock ticks, so few fires give a coarse "
        "figure; 'full GC' = full collections of the cyclic garbage collector in the window / the "
        "longest, in ms (jobhost only: a pause of the whole process)"
    )
    print(_HEADER)
    results: dict[tuple[int, str, str], Outcome] = {}
    for jobs in a.jobs:
        if "sqlite" in a.stores or "memory" in a.stores:
            results[(jobs, "jobhost", "sqlite")] = _row(
                bench.jobhost("sqlite", jobs), jobs, "jobhost", "sqlite"
            )
        if "postgres" in a.stores:
            results[(jobs, "jobhost", "postgres")] = _row(
                bench.jobhost("postgres", jobs), jobs, "jobhost", "postgres"
            )
        for store in a.stores:
            results[(jobs, "apscheduler", store)] = _row(
                bench.apscheduler(store, jobs), jobs, "APScheduler", store
            )
    print(
        "\njobhost / APScheduler (above 1 = jobhost slower or bigger; lag ratios compare the "
        "runs that happened, so a scheduler that misses occurrences looks faster than it is)"
    )
    for jobs in a.jobs:
        for ours, theirs in (("sqlite", "memory"), ("sqlite", "sqlite"), ("postgres", "postgres")):
            mine = results.get((jobs, "jobhost", ours))
            peer = results.get((jobs, "apscheduler", theirs))
            if mine is not None and peer is not None:
                print(_ratio(jobs, ours, theirs, mine, peer))


_HEADER = (
    f"{'N':>5} {'scheduler':<11} {'store':<8} {'fires':>6} {'misses':>6} {'dups':>4} "
    f"{'recorded':>8} "
    f"{'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'exec p99':>8} {'CPU/1k':>7} "
    f"{'PG CPU':>7} {'SQL/fire':>8} {'RSS MB':>7} {'1st fire':>8} {'full GC':>9}"
)


def _row(outcome: Outcome, jobs: int, scheduler: str, store: str) -> Outcome:
    if not outcome.started:
        print(f"{jobs:>5} {scheduler:<11} {store:<8} no fire before the start-up timeout or exit")
        if outcome.note:
            print(f"      its last words: {outcome.note}")
        return outcome
    lags = outcome.lags
    statements = (
        f"{outcome.statements / outcome.fires_in_window:>8.1f}"
        if outcome.statements is not None and outcome.fires_in_window
        else f"{'-':>8}"
    )
    dups = max(outcome.duplicates, outcome.ledger_duplicates or 0)
    print(
        f"{jobs:>5} {scheduler:<11} {store:<8} {outcome.ran:>6} {outcome.misses:>6} "
        f"{dups:>4} {outcome.recorded_missed:>8} {_ms(percentile(lags, 50))} "
        f"{_ms(percentile(lags, 95))} "
        f"{_ms(percentile(lags, 99))} {_ms(max(lags, default=math.nan))} "
        f"{_ms(percentile(outcome.executor_lags, 99))} {number(outcome.cpu_per_1k, 7, 2)} "
        f"{number(outcome.backend_cpu, 7, 2)} {statements} {number(outcome.rss_mb, 7, 0)} "
        f"{number(outcome.to_first_fire, 7, 2)}s {_collections(outcome.full_collections)}",
        flush=True,
    )
    for why, count in sorted(outcome.not_run.items()):
        print(f"      not run: {count} {why}", flush=True)
    return outcome


def _collections(pauses: list[float] | None) -> str:
    """``2/5.3``: how many full collections ran in the window and the longest, in ms."""
    if pauses is None:
        return f"{'-':>9}"
    return f"{f'{len(pauses)}/{max(pauses, default=0.0):.1f}':>9}"


def _ratio(jobs: int, ours: str, theirs: str, mine: Outcome, peer: Outcome) -> str:
    parts = [
        f"p{q} {_divide(percentile(mine.lags, q), percentile(peer.lags, q))}" for q in (50, 95, 99)
    ]
    exec_p99 = _divide(percentile(mine.executor_lags, 99), percentile(peer.executor_lags, 99))
    parts.append(f"exec p99 {exec_p99}")
    parts.append(f"CPU/1k {_divide(mine.cpu_per_1k, peer.cpu_per_1k)}")
    parts.append(f"RSS {_divide(mine.rss_mb, peer.rss_mb)}")
    parts.append(f"misses {mine.misses} vs {peer.misses}")
    return f"N={jobs:<5} jobhost {ours} / APScheduler {theirs}: " + ", ".join(parts)


def _divide(ours: float, theirs: float) -> str:
    if math.isnan(ours) or math.isnan(theirs) or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}x"


def _ms(value: float) -> str:
    return number(value, 8, 1)


def _print_machine(bench: Bench) -> None:
    a = bench.arguments
    version = None
    if "postgres" in a.stores or "replicas" in a.sections:
        bench.postgres = Postgres(a.postgres_url)
        version = bench.postgres.version()
    for line in machine(version):
        print(line)
    print(f"sections: {', '.join(a.sections)}; command: {' '.join(sys.argv)}", flush=True)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sections",
        type=_choices(SECTIONS),
        default=None,
        help="comma-separated: scale,replicas,startup,idle,runlogs,backfill (default: scale, "
        "plus any section whose own option is given); 'all' for every one",
    )
    parser.add_argument(
        "--jobs",
        type=_ints,
        default=[1, 100],
        help="scale: N values, e.g. 1,10,100,300,1000 (default 1,100)",
    )
    parser.add_argument(
        "--stores",
        type=_choices(STORES),
        default=["memory", "sqlite"],
        help="memory,sqlite,postgres (default memory,sqlite); startup and idle use the SQL ones",
    )
    parser.add_argument("--instants", type=int, default=30, help="seconds measured (30)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after the first fire")
    parser.add_argument(
        "--drain",
        type=float,
        default=10.0,
        help="longest wait for late runs of the window's occurrences (10)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=120.0,
        help="longest wait for a process's first fire (120)",
    )
    parser.add_argument(
        "--replicas",
        type=_ints,
        default=None,
        help="replicas: jobhost processes on one PostgreSQL database, each count "
        "a run, e.g. 3 or 1,2,3 (default 1,2,3)",
    )
    parser.add_argument(
        "--replica-jobs",
        type=int,
        default=3000,
        help="replicas: every-second jobs declared (3000: room for 2,000 fires/s together)",
    )
    parser.add_argument(
        "--startup-jobs",
        type=int,
        default=None,
        help="startup: jobs declared (10000): one every second, the rest "
        "hourly, spread over the hour",
    )
    parser.add_argument(
        "--startup-observe",
        type=float,
        default=20.0,
        help="startup: seconds watched after the first fire (20)",
    )
    parser.add_argument("--idle-seconds", type=float, default=None, help="idle: window (60)")
    parser.add_argument("--idle-jobs", type=int, default=1, help="idle: nightly jobs (1)")
    parser.add_argument(
        "--log-lines",
        type=int,
        default=None,
        help="runlogs: lines each run writes through its logger (20)",
    )
    parser.add_argument(
        "--log-jobs", type=int, default=100, help="runlogs: every-second jobs (100)"
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        help="runlogs: the hosts' log_level (WARNING: lines kept, not printed; INFO: both)",
    )
    parser.add_argument(
        "--backfill-jobs", type=int, default=100, help="backfill: every-second jobs (100)"
    )
    parser.add_argument(
        "--backfill-occurrences",
        type=int,
        default=500,
        help="backfill: past nights of bench.backfill replayed (500)",
    )
    parser.add_argument(
        "--backfill-concurrency", type=int, default=4, help="backfill: its concurrency (4)"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("JOBHOST_BENCH_POSTGRES_URL")
        or os.environ.get("JOBHOST_TEST_POSTGRES_URL")
        or _DEFAULT_POSTGRES,
        help="server for the PostgreSQL runs; each run makes and drops a database",
    )
    arguments = parser.parse_args()
    sections = arguments.sections or ["scale"]
    if arguments.sections is None:
        own = {
            "replicas": arguments.replicas,
            "startup": arguments.startup_jobs,
            "idle": arguments.idle_seconds,
            "runlogs": arguments.log_lines,
        }
        sections += [name for name, value in own.items() if value is not None]
        if any(value is not None for value in own.values()) and "--jobs" not in sys.argv:
            sections.remove("scale")
    arguments.sections = sections
    arguments.replicas = arguments.replicas or [1, 2, 3]
    arguments.startup_jobs = arguments.startup_jobs or 10_000
    arguments.idle_seconds = arguments.idle_seconds or 60.0
    arguments.log_lines = 20 if arguments.log_lines is None else arguments.log_lines
    return arguments


def _ints(value: str) -> list[int]:
    return [int(part) for part in value.split(",") if part.strip()]


def _choices(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(value: str) -> list[str]:
        chosen = list(allowed) if value == "all" else [p.strip() for p in value.split(",")]
        unknown = [item for item in chosen if item not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {allowed}")
        return chosen

    return parse


def _interrupt(_signal: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
