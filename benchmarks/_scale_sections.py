"""The replicas, start-up and idle sections of ``benchmarks/scale.py``."""

from __future__ import annotations

import argparse
import math
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import Protocol

from _scale_measure import (
    Outcome,
    first_fire,
    jobhost_launch,
    number,
    percentile,
    read_fires,
    sql_counts,
    wait_for,
)
from _scale_system import (
    Children,
    Postgres,
    backend_cpu,
    cpu_seconds,
    peak_rss_mb,
    voluntary_switches,
)

__all__ = ["BenchSite", "idle_section", "replicas_section", "startup_section"]


class BenchSite(Protocol):
    """What a section uses of the bench ``scale.py`` sets up."""

    arguments: argparse.Namespace
    children: Children
    postgres: Postgres | None

    def directory(self, label: str) -> Path: ...

    def store(self, store: str, directory: Path, name: str) -> tuple[str, str]: ...

    def jobhost(self, store: str, jobs: int, replicas: int = 1) -> Outcome: ...


def replicas_section(bench: BenchSite) -> None:
    a = bench.arguments
    print(
        f"\n== replicas: K jobhost processes on one PostgreSQL database, {a.replica_jobs} jobs "
        f"every 1s, {a.instants} instants =="
    )
    print(
        "fires/s = runs observed in the window / its length; duplicates = occurrences run more "
        "than once by the executors' own logs; ledger dup = (job, occurrence) with two rows of "
        "attempt >= 1; CPU = all replicas together; SQL/fire and txn/fire = statements and "
        "transactions of all replicas per fire; claim txn = the loops' transactions (one claim "
        "turn each) and their mean hold, BEGIN to COMMIT, in ms; PG ms/fire = the backends' CPU "
        "per fire"
    )
    print(
        f"{'K':>3} {'fires/s':>8} {'fires':>7} {'misses':>7} {'dups':>5} {'ledger dup':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'CPU/1k':>7} {'PG CPU':>7} {'RSS MB':>7} "
        f"{'SQL/fire':>8} {'txn/fire':>8} {'claim txn':>9} {'hold ms':>7} {'PG ms/fire':>10}"
    )
    for replicas in a.replicas:
        outcome = bench.jobhost("postgres", a.replica_jobs, replicas=replicas)
        if not outcome.started:
            print(f"{replicas:>3} no fire before the start-up timeout or exit", flush=True)
            if outcome.note:
                print(f"    its last words: {outcome.note}")
            continue
        ledger = "-" if outcome.ledger_duplicates is None else str(outcome.ledger_duplicates)
        print(
            f"{replicas:>3} {outcome.fires_in_window / a.instants:>8.1f} {outcome.ran:>7} "
            f"{outcome.misses:>7} {outcome.duplicates:>5} {ledger:>10} "
            f"{number(percentile(outcome.lags, 50), 8, 1)} "
            f"{number(percentile(outcome.lags, 99), 8, 1)} {number(outcome.cpu_per_1k, 7, 2)} "
            f"{number(outcome.backend_cpu, 7, 2)} {number(outcome.rss_mb, 7, 0)} "
            f"{_per_fire(outcome)}",
            flush=True,
        )


def _per_fire(outcome: Outcome) -> str:
    """Statements, transactions and claim-transaction hold time per fire, from the counts."""
    fires = outcome.fires_in_window
    threads = outcome.per_thread
    if not fires or not threads:
        return f"{'-':>8} {'-':>8} {'-':>9} {'-':>7} {'-':>10}"
    statements = sum(slot.get("statements", 0) for slot in threads.values())
    transactions = sum(slot.get("transactions", 0) for slot in threads.values())
    loop = threads.get("MainThread", {})
    claims = loop.get("transactions", 0)
    hold = loop.get("held_us", 0) / claims / 1000 if claims else float("nan")
    database = (outcome.backend_cpu or float("nan")) / fires * 1000
    return (
        f"{statements / fires:>8.2f} {transactions / fires:>8.2f} {claims:>9} "
        f"{number(hold, 7, 2)} {number(database, 10, 3)}"
    )


def startup_section(bench: BenchSite) -> None:
    a = bench.arguments
    print(
        f"\n== startup: {a.startup_jobs} declared jobs (bench.first every 1s, the rest hourly "
        f"spread over the hour), then {a.startup_observe:g}s watched =="
    )
    print(
        "to /readyz = process spawn to the first 200 from /readyz, and the process's CPU "
        "seconds until then (the figure a loaded machine disturbs least), of which probes = "
        "its HTTP thread's, answering the benchmark's polls every 50 ms; "
        "to 1st fire = process spawn to the executor's first run; due at = when that occurrence "
        "was due, from spawn (negative: a catch-up of an occurrence due while the host was "
        "down); then over the watched window: CPU s per wall second, bench.first's "
        "lag p99 and misses, hourly runs vs due"
    )
    print(
        f"{'store':<8} {'start':<11} {'to /readyz':>10} {'CPU s':>6} {'probes':>6} "
        f"{'to 1st fire':>11} "
        f"{'due at':>7} {'CPU s/s':>8} {'1s p99 ms':>9} {'1s miss':>7} {'hourly ran/due':>14} "
        f"{'RSS MB':>7}"
    )
    print(_catalog_cpu(bench), flush=True)
    for store in _sql_stores(bench):
        directory = bench.directory(f"startup-{store}")
        url, _ = bench.store(store, directory, "jobhost")
        for phase in ("first start", "restart"):
            run_directory = bench.directory(f"startup-{store}-{phase.replace(' ', '-')}")
            _startup_run(bench, store, phase, run_directory, url)


def _startup_run(bench: BenchSite, store: str, phase: str, directory: Path, url: str) -> None:
    a = bench.arguments
    port = _free_port()
    launch = jobhost_launch(
        directory, url, a.startup_jobs, "hourly", http_listen=f"127.0.0.1:{port}"
    )
    spawned = time.time()
    process = bench.children.start(launch.argv, launch.env, launch.output)
    try:
        ready = wait_for(partial(_ready, port), a.start_timeout, [process])
        ready_cpu = cpu_seconds(process.pid)
        # Answering the benchmark's own probes is not starting: the longer a loaded machine
        # makes the wait, the more of them the HTTP thread answers.
        probes = sum(
            cpu_seconds(process.pid, tid)
            for tid, name in _host_threads(launch.counts).items()
            if name == "jobhost-http"
        )
        fired = wait_for(lambda: first_fire(directory), a.start_timeout, [process])
        if fired is None:
            print(f"{store:<8} {phase:<11} no fire within {a.start_timeout:g}s", flush=True)
            return
        due = min((observed, occ) for kind, _, occ, observed in read_fires(directory))[1]
        opens = math.ceil(time.time())
        closes = opens + a.startup_observe
        cpu_before = cpu_seconds(process.pid)
        _sleep_until(closes)
        cpu = cpu_seconds(process.pid) - cpu_before
        rss = peak_rss_mb(process.pid)
        time.sleep(min(a.drain, 3.0))
    finally:
        bench.children.stop(process)
    fires = read_fires(directory)
    first = {
        round(occ, 3): observed
        for kind, job, occ, observed in fires
        if kind == "run" and job == "bench.first" and opens <= occ < closes
    }
    lags = [(observed - occ) * 1000 for occ, observed in first.items()]
    hourly = sum(
        1
        for kind, job, occ, _ in fires
        if kind == "run" and job != "bench.first" and opens <= occ < closes
    )
    due_hourly = _hourly_due(opens, int(closes), a.startup_jobs - 1)
    print(
        f"{store:<8} {phase:<11} {_since(ready, spawned)} {ready_cpu:>6.2f} {probes:>6.2f} "
        f"{fired - spawned:>10.2f}s {due - spawned:>6.2f}s {cpu / a.startup_observe:>8.2f} "
        f"{number(percentile(lags, 99), 9, 1)} "
        f"{int(a.startup_observe) - len(first):>7} {f'{hourly}/{due_hourly}':>14} {rss:>7.0f}",
        flush=True,
    )


_CATALOG_CPU = """
import sys, time
from jobhost.catalog import build_catalog
from jobhost.config.loading import load_settings
settings = load_settings(sys.argv[1])
began = time.process_time()
catalog = build_catalog(settings)
print(f"{time.process_time() - began:.2f} {len(catalog.jobs)} {catalog.ok}")
"""


def _catalog_cpu(bench: BenchSite) -> str:
    """Building the catalog alone, in a fresh process each time (no parse is cached yet): CPU
    seconds, the best of three."""
    a = bench.arguments
    directory = bench.directory("startup-catalog")
    launch = jobhost_launch(directory, "sqlite://", a.startup_jobs, "hourly")
    config = launch.argv[launch.argv.index("--config") + 1]
    answers = []
    for _ in range(3):
        answer = subprocess.run(
            [sys.executable, "-c", _CATALOG_CPU, config],
            env=launch.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if answer.returncode != 0:
            return f"catalog build: failed: {answer.stderr.strip()[-300:]}"
        answers.append(answer.stdout.split())
    cpu, jobs, ok = min(answers, key=lambda answer: float(answer[0]))
    return f"catalog build alone (validation and all): {cpu} CPU s for {jobs} jobs (ok: {ok})"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ready(port: int) -> float | None:
    """The time ``/readyz`` first answered 200, or None while it does not."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1.0) as answer:
            return time.time() if answer.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


def _since(moment: float | None, spawned: float) -> str:
    return f"{moment - spawned:>9.2f}s" if moment is not None else f"{'-':>10}"


def _hourly_due(opens: int, closes: int, count: int) -> int:
    """Occurrences of the plugin's hourly jobs (job i at second i mod 3600) in the window."""
    return sum(len(range(second % 3600, count, 3600)) for second in range(opens, closes))


def idle_section(bench: BenchSite) -> None:
    a = bench.arguments
    print(
        f"\n== idle: {a.idle_jobs} nightly job(s) (03:00 UTC), {a.idle_seconds:g}s after "
        "start-up settled =="
    )
    print(
        "counted inside the host by SQLAlchemy events: statements, transactions begun, and "
        "bursts (statements on one thread less than 0.1s apart: one loop turn or one heartbeat "
        "each), per thread; wake-ups = voluntary context switches of each of the host's threads "
        "(from /proc: each is one sleep, so one wake-up after it; the benchmark's own counting "
        "thread left out, its CPU not); PG CPU = the host's backends"
    )
    print(
        f"{'store':<8} {'CPU s':>6} {'PG CPU':>7} {'stmts':>6} {'txns':>5} {'wake-ups':>8}  "
        "bursts per thread; wake-ups per thread"
    )
    for store in _sql_stores(bench):
        directory = bench.directory(f"idle-{store}")
        url, application = bench.store(store, directory, "jobhost")
        launch = jobhost_launch(directory, url, a.idle_jobs, "nightly")
        process = bench.children.start(launch.argv, launch.env, launch.output)
        postgres = bench.postgres if application else None
        try:
            ready = wait_for(partial(_has_run_sql, launch.counts), a.start_timeout, [process])
            if ready is None:
                print(f"{store:<8} the host did not start; see {launch.output}", flush=True)
                continue
            time.sleep(3.0)  # start-up's catalog sync and first turns are not idling
            threads = _host_threads(launch.counts)
            before = (
                cpu_seconds(process.pid),
                backend_cpu(postgres, application),
                sql_counts(launch.counts),
                _wake_ups(process.pid, threads),
            )
            time.sleep(a.idle_seconds)
            after = (
                cpu_seconds(process.pid),
                backend_cpu(postgres, application),
                sql_counts(launch.counts),
                _wake_ups(process.pid, threads),
            )
        finally:
            bench.children.stop(process)
        _idle_row(store, before, after, bool(application))


def _host_threads(counts: Path | None) -> dict[int, str]:
    """The host's threads by native id, as the counting wrapper last listed them."""
    listed = sql_counts(counts).get("threads", {})
    return {int(tid): str(name) for tid, name in listed.items() if name != "bench-dump"}


def _wake_ups(pid: int, threads: dict[int, str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for tid, name in threads.items():
        found[name] = found.get(name, 0) + voluntary_switches(pid, tid)
    return found


def _idle_row(
    store: str,
    before: tuple[float, dict[int, float], dict[str, dict[str, int]], dict[str, int]],
    after: tuple[float, dict[int, float], dict[str, dict[str, int]], dict[str, int]],
    postgres: bool,
) -> None:
    def total(counts: dict[str, dict[str, int]], kind: str) -> int:
        return sum(counts.get(kind, {}).values())

    old, new = before[2], after[2]
    bursts = {
        thread: count - old.get("bursts", {}).get(thread, 0)
        for thread, count in new.get("bursts", {}).items()
    }
    woke = {name: count - before[3].get(name, 0) for name, count in after[3].items()}
    backends = (
        f"{sum(cpu - before[1].get(pid, 0.0) for pid, cpu in after[1].items()):>7.2f}"
        if postgres
        else f"{'-':>7}"
    )
    listed = ", ".join(f"{thread} {count}" for thread, count in sorted(bursts.items()) if count)
    waking = ", ".join(f"{thread} {count}" for thread, count in sorted(woke.items()) if count)
    print(
        f"{store:<8} {after[0] - before[0]:>6.2f} {backends} "
        f"{total(new, 'statements') - total(old, 'statements'):>6} "
        f"{total(new, 'transactions') - total(old, 'transactions'):>5} "
        f"{sum(woke.values()):>8}  {listed or 'none'}; {waking or 'none'}",
        flush=True,
    )


def _has_run_sql(counts: Path | None) -> bool:
    return bool(sql_counts(counts).get("statements"))


def _sql_stores(bench: BenchSite) -> list[str]:
    stores = [store for store in bench.arguments.stores if store != "memory"]
    return stores or ["sqlite"]


def _sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.5))
