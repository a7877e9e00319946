"""One measured run of ``benchmarks/scale.py``: start the scheduler processes, watch a window.

A run starts one or more processes (``jobhost run`` replicas, or APScheduler's runner), waits
for the first fire, lets ``warmup`` seconds pass, then measures the window of ``instants`` whole
seconds that follows: CPU of the processes and of their PostgreSQL backends across the window,
fires observed in it, and every occurrence due in it (run, late, missed or never). Fires are
read from the executor's own log lines (``run JOB OCCURRENCE OBSERVED``); jobhost's lag is read
from its ledger (``runs.started_at - runs.occurrence``), as an operator would.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _scale_system import Children, Postgres, backend_cpu, cpu_seconds, peak_rss_mb
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

__all__ = [
    "HERE",
    "Launch",
    "Outcome",
    "Window",
    "first_fire",
    "jobhost_launch",
    "measure",
    "number",
    "percentile",
    "read_fires",
    "read_ledger",
    "sql_counts",
    "wait_for",
]

HERE = Path(__file__).resolve().parent
_PLUGIN = HERE / "_scale_plugin.py"


@dataclass
class Launch:
    """One process to start: argv, environment, where its output goes, its SQL counts file."""

    argv: list[str]
    env: dict[str, str]
    output: Path
    counts: Path | None = None


@dataclass
class Window:
    instants: int = 30
    warmup: float = 2.0
    start_timeout: float = 120.0
    drain: float = 10.0


@dataclass
class Outcome:
    """What one run measured; times in seconds, lags in milliseconds."""

    expected: int = 0
    fires_in_window: int = 0
    ran: int = 0
    misses: int = 0
    recorded_missed: int = 0
    not_run: Counter[str] = field(default_factory=Counter)
    """Missed and skipped rows in the window by outcome, reason and occurrence (UTC second)."""
    duplicates: int = 0
    ledger_duplicates: int | None = None
    lags: list[float] = field(default_factory=list)
    executor_lags: list[float] = field(default_factory=list)
    cpu: float = 0.0
    backend_cpu: float | None = None
    rss_mb: float = float("nan")
    statements: int | None = None
    to_first_fire: float | None = None
    started: bool = True
    note: str = ""
    per_thread: dict[str, dict[str, int]] = field(default_factory=dict)
    full_collections: list[float] | None = None
    """Each full collection of the cyclic collector in the window, in milliseconds (a jobhost
    process only)."""

    @property
    def cpu_per_1k(self) -> float:
        return self.cpu / self.fires_in_window * 1000 if self.fires_in_window else float("nan")


def jobhost_launch(
    directory: Path,
    url: str,
    jobs: int,
    shape: str,
    name: str = "host",
    *,
    log_level: str = "WARNING",
    log_lines: int = 0,
    http_listen: str | None = None,
    backfill_job: bool = False,
) -> Launch:
    """``jobhost --config DIR/NAME.toml run`` through the SQL-counting wrapper; each run writes
    ``log_lines`` lines through its logger; ``http_listen`` serves the probes there;
    ``backfill_job`` declares the nightly ``bench.backfill`` too."""
    config = directory / f"{name}.toml"
    listen = f"http_listen = {json.dumps(http_listen)}\n" if http_listen else ""
    config.write_text(
        f"database_url = {json.dumps(url)}\n"
        f"{listen}"
        f"plugins = [{json.dumps(str(_PLUGIN))}]\n"
        f"log_level = {json.dumps(log_level)}\n"
        'shutdown_grace = "5s"\n'
        "[modules.bench]\n"
        f"jobs = {jobs}\n"
        f"shape = {json.dumps(shape)}\n"
        f"log_dir = {json.dumps(str(directory))}\n"
        f"log_lines = {log_lines}\n"
        f"backfill_job = {json.dumps(backfill_job)}\n"
    )
    # The user's own JOBHOST_* settings would win over the file; only the benchmark's count.
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBHOST_")}
    counts = directory / f"{name}-sql.json"
    env |= {"JOBHOST_LOAD_PLUGINS": "", "BENCH_SQL_COUNTS": str(counts)}
    argv = [sys.executable, str(HERE / "_scale_host.py"), "--config", str(config), "run"]
    return Launch(argv, env, directory / f"{name}.out", counts)


def measure(
    children: Children,
    launches: Sequence[Launch],
    directory: Path,
    window: Window,
    jobs: int,
    *,
    ledger_url: str | None = None,
    postgres: Postgres | None = None,
    application: str = "",
    at_open: Callable[[], None] | None = None,
) -> Outcome:
    """Start ``launches``, measure one window of ``jobs`` every-second jobs, stop them;
    ``at_open`` is called as the window opens (to start work beside the scheduled runs)."""
    outcome = Outcome()
    spawned = time.time()
    processes = [children.start(item.argv, item.env, item.output) for item in launches]
    try:
        started = wait_for(lambda: first_fire(directory), window.start_timeout, processes)
        if started is None:
            outcome.started = False
            outcome.note = _tail(launches[0].output)
            return outcome
        outcome.to_first_fire = started - spawned
        # Replicas: give each a chance to start firing before the window opens.
        wait_for(
            lambda: len(list(directory.glob("fires-*.log"))) >= len(processes) or None,
            min(window.start_timeout, 30.0),
            processes,
        )
        opens = math.ceil(time.time() + window.warmup)
        closes = opens + window.instants
        _sleep_until(opens)
        cpu_before = sum(cpu_seconds(process.pid) for process in processes)
        backends_before = backend_cpu(postgres, application)
        counts_before = [sql_counts(item.counts) for item in launches]
        if at_open is not None:
            at_open()
        _sleep_until(closes)
        outcome.cpu = sum(cpu_seconds(process.pid) for process in processes) - cpu_before
        backends_after = backend_cpu(postgres, application)
        counts_after = [sql_counts(item.counts) for item in launches]
        outcome.rss_mb = max(peak_rss_mb(process.pid) for process in processes)
        if postgres is not None:
            outcome.backend_cpu = sum(
                cpu - backends_before.get(pid, 0.0) for pid, cpu in backends_after.items()
            )
        outcome.statements, outcome.per_thread = _count_delta(counts_before, counts_after)
        outcome.expected = jobs * window.instants
        _drain(directory, opens, closes, outcome.expected, window.drain)
        outcome.full_collections = _full_collections(launches, opens, closes)
    finally:
        for process in processes:
            children.stop(process)
    _score(outcome, read_fires(directory), opens, closes)
    if ledger_url is not None:
        try:
            rows = read_ledger(ledger_url)
        except SQLAlchemyError as error:
            # A changed ledger must not sink the run: the executors' own lines still stand.
            print(f"  (ledger unreadable, lag from the executor: {error})", file=sys.stderr)
        else:
            _score_ledger(outcome, rows, opens, closes)
    return outcome


def wait_for(
    probe: Callable[[], float | bool | None],
    timeout: float,
    processes: Sequence[subprocess.Popen[bytes]] = (),
) -> float | None:
    """Poll ``probe`` until it answers (returns its answer), the time is up or a process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = probe()
        if answer:
            return float(answer)
        if any(process.poll() is not None for process in processes):
            return None
        time.sleep(0.05)
    return None


def read_fires(directory: Path) -> list[tuple[str, str, float, float]]:
    """Every ``KIND JOB OCCURRENCE OBSERVED`` line the executors wrote under ``directory``."""
    lines: list[tuple[str, str, float, float]] = []
    for path in directory.glob("fires-*.log"):
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 4:
                lines.append((parts[0], parts[1], float(parts[2]), float(parts[3])))
    return lines


def read_ledger(url: str) -> list[tuple[str, float, int, str, float | None, str]]:
    """``(job, occurrence, attempt, outcome, started_at, reason)`` of every scheduled run
    row (the reason says why a missed or skipped occurrence did not run)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT job_name, occurrence, attempt, outcome, started_at, reason "
                    "FROM runs "
                    "WHERE occurrence IS NOT NULL"
                )
            ).all()
    finally:
        engine.dispose()
    return [
        (
            str(job),
            _epoch(occurrence),
            int(attempt),
            str(outcome),
            _epoch_or_none(started),
            str(reason or ""),
        )
        for job, occurrence, attempt, outcome, started, reason in rows
    ]


def sql_counts(path: Path | None) -> dict[str, dict[str, int]]:
    if path is None:
        return {}
    try:
        body: dict[str, dict[str, int]] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return body


def number(value: float | None, width: int, digits: int) -> str:
    """``value`` right-aligned in ``width``; a dash when there is none (None or NaN)."""
    if value is None or math.isnan(value):
        return f"{'-':>{width}}"
    return f"{value:>{width}.{digits}f}"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


def first_fire(directory: Path) -> float | None:
    for path in directory.glob("fires-*.log"):
        first = path.read_text(encoding="utf-8").split("\n", 1)[0].split()
        if len(first) == 4:
            return float(first[3])
    return None


def _tail(output: Path) -> str:
    """The last lines a process printed: why it never fired, as it said it."""
    try:
        lines = output.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-3:])


def _drain(directory: Path, opens: float, closes: float, expected: int, limit: float) -> None:
    """Wait for late runs of the window's occurrences, until all ran or none came for 2 s."""
    deadline = time.monotonic() + limit
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        ran = len(_ran_in_window(read_fires(directory), opens, closes))
        if ran >= expected:
            return
        if ran != seen:
            seen, quiet_since = ran, time.monotonic()
        elif time.monotonic() - quiet_since > 2.0:
            return
        time.sleep(0.5)


def _ran_in_window(
    fires: Sequence[tuple[str, str, float, float]], opens: float, closes: float
) -> dict[tuple[str, float], float]:
    first: dict[tuple[str, float], float] = {}
    for kind, job, occurrence, observed in fires:
        if kind == "run" and opens - 0.0005 <= occurrence < closes - 0.0005:
            key = (job, round(occurrence, 3))
            first[key] = min(first.get(key, observed), observed)
    return first


def _score(
    outcome: Outcome, fires: list[tuple[str, str, float, float]], opens: float, closes: float
) -> None:
    ran = _ran_in_window(fires, opens, closes)
    outcome.ran = len(ran)
    outcome.misses = max(outcome.expected - len(ran), 0)
    outcome.executor_lags = [(observed - key[1]) * 1000 for key, observed in ran.items()]
    outcome.lags = list(outcome.executor_lags)
    outcome.fires_in_window = sum(
        1 for kind, _, _, observed in fires if kind == "run" and opens <= observed < closes
    )
    outcome.recorded_missed = sum(
        1 for kind, _, occurrence, _ in fires if kind != "run" and opens <= occurrence < closes
    )
    per_occurrence = Counter((job, round(occ, 3)) for kind, job, occ, _ in fires if kind == "run")
    outcome.duplicates = sum(count - 1 for count in per_occurrence.values() if count > 1)


def _score_ledger(
    outcome: Outcome,
    rows: list[tuple[str, float, int, str, float | None, str]],
    opens: float,
    closes: float,
) -> None:
    in_window = [row for row in rows if opens - 0.0005 <= row[1] < closes - 0.0005]
    first: dict[tuple[str, float], tuple[int, float]] = {}
    for job, occurrence, attempt, _, started, _ in in_window:
        if attempt >= 1 and started is not None:
            key = (job, round(occurrence, 3))
            if key not in first or attempt < first[key][0]:
                first[key] = (attempt, started)
    outcome.lags = [(started - key[1]) * 1000 for key, (_, started) in first.items()]
    not_run = [row for row in in_window if row[3] in {"missed", "skipped"}]
    outcome.recorded_missed = len(not_run)
    outcome.not_run = Counter(
        f"{kind} ({reason or 'no reason'}) for {time.strftime('%H:%M:%S', time.gmtime(occ))}"
        for _, occ, _, kind, _, reason in not_run
    )
    attempts = Counter((job, round(occ, 3)) for job, occ, attempt, *_ in rows if attempt >= 1)
    outcome.ledger_duplicates = sum(1 for count in attempts.values() if count > 1)


_NOT_COUNTS = ("threads", "texts", "full_collections")
"""Keys of the counts file that name things rather than count them."""


def _count_delta(
    before: list[dict[str, dict[str, int]]], after: list[dict[str, dict[str, int]]]
) -> tuple[int | None, dict[str, dict[str, int]]]:
    if not any(after):
        return None, {}
    per_thread: dict[str, dict[str, int]] = {}
    for old, new in zip(before, after, strict=True):
        for kind, threads in new.items():
            if kind in _NOT_COUNTS:
                continue
            for thread, count in threads.items():
                slot = per_thread.setdefault(thread, {})
                slot[kind] = slot.get(kind, 0) + count - old.get(kind, {}).get(thread, 0)
    total = sum(slot.get("statements", 0) for slot in per_thread.values())
    return total, per_thread


def _full_collections(
    launches: Sequence[Launch], opens: float, closes: float
) -> list[float] | None:
    """The full collections each process's counts file lists between ``opens`` and
    ``closes``, in milliseconds; None when no process keeps such a file."""
    if not any(item.counts for item in launches):
        return None
    found: list[float] = []
    for item in launches:
        listed: Any = sql_counts(item.counts).get("full_collections", [])
        found += [us / 1000 for end, us in listed if opens <= end <= closes]
    return found


def _sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.5))


def _epoch(value: Any) -> float:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _epoch_or_none(value: Any) -> float | None:
    return None if value is None else _epoch(value)
