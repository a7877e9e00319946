"""Where the CPU of 1,000 fires goes: ``python benchmarks/profile_fires.py``.

Starts a real ``jobhost run`` (through ``_scale_host.py``, which counts SQL) with N jobs each
firing every second, waits for the first fire and a warm-up, then samples every thread of the
process with py-spy (``pip install py-spy``) for as long as ``--fires`` fires take. Each sample
is put in one phase by the frames on its stack, and the phases are printed as CPU milliseconds
per 1,000 fires and as shares, beside the process's CPU (from ``/proc``) and the SQL statements
and transactions per fire, by thread. py-spy samples only threads that are on the CPU, so a
waiting thread costs nothing here, as it costs nothing in the process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from _scale_measure import first_fire, jobhost_launch, sql_counts, wait_for
from _scale_system import Children, Postgres, cpu_seconds
from sqlalchemy import create_engine, func, select, text

PHASES = (
    # (phase, any of these frame markers on the stack); the first phase that matches wins.
    (
        "run logs and logging (job lines, writer)",
        ("envelope/runlog.py", "logging/__init__.py", "append_chunks", "trim_lines"),
    ),
    ("claim turn (tick, claim, wake-ups)", ("firing/tick.py", "store/claim", "wakeups.py")),
    (
        "reporting (metrics, audit line, sinks)",
        ("_run (jobhost/envelope/lifecycle.py", "submit (jobhost/envelope/lifecycle.py"),
    ),
    ("recording (ledger writes)", ("_write_until_done", "envelope/lifecycle.py")),
    ("execution (span, context, executor)", ("envelope/envelope.py",)),
    ("heartbeat and leases", ("_beat (jobhost/firing/host.py", "_beat_once")),
    ("signals", ("store/signals.py",)),
    ("loop (turn, submit, wake)", ("jobhost/firing/host.py", "jobhost/firing/slots.py")),
)
OTHER = "other (interpreter, logging, threads)"


def main() -> None:
    arguments = _arguments()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        sys.exit("py-spy is not installed: pip install py-spy")
    children = Children()
    postgres = Postgres(arguments.postgres_url) if arguments.store == "postgres" else None
    with tempfile.TemporaryDirectory(prefix="jobhost-profile-") as root:
        directory = Path(root)
        url = (
            postgres.create(f"profile-{uuid.uuid4().hex[:8]}")
            if postgres is not None
            else f"sqlite:///{directory}/store.db"
        )
        launch = jobhost_launch(
            directory, url, arguments.jobs, "every-second", log_lines=arguments.log_lines
        )
        try:
            process = children.start(launch.argv, launch.env, launch.output)
            if not wait_for(lambda: first_fire(directory) is not None, arguments.start_timeout):
                sys.exit(f"no fire within {arguments.start_timeout:g}s: see {launch.output}")
            time.sleep(arguments.warmup)
            seconds = max(arguments.fires / arguments.jobs, 1.0)
            _profile(
                py_spy,
                process.pid,
                directory=directory,
                url=url,
                counts_file=launch.counts,
                seconds=seconds,
                arguments=arguments,
            )
        finally:
            children.stop_all()
            if postgres is not None:
                postgres.drop_all()
                postgres.engine.dispose()


def _profile(
    py_spy: str,
    pid: int,
    *,
    directory: Path,
    url: str,
    counts_file: Path | None,
    seconds: float,
    arguments: argparse.Namespace,
) -> None:
    raw = directory / "samples.txt"
    fires_before, sql_before = _fires(url), sql_counts(counts_file)
    cpu_before = cpu_seconds(pid)
    subprocess.run(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(arguments.rate),
            "--duration",
            str(round(seconds)),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--nonblocking",
            *(["--gil"] if arguments.gil else []),
        ],
        check=True,
        capture_output=True,
    )
    cpu = cpu_seconds(pid) - cpu_before
    if arguments.raw:
        shutil.copyfile(raw, arguments.raw)
    time.sleep(0.6)  # the wrapper writes its SQL counts every half second
    fires = _fires(url) - fires_before
    sql_after = sql_counts(counts_file)
    phases, functions = _phases(raw)
    samples = sum(phases.values())
    print(
        f"jobhost run, {arguments.jobs} jobs every second on {arguments.store}, "
        f"{seconds:.0f}s sampled at {arguments.rate} Hz: {fires} fires, process CPU "
        f"{cpu:.2f}s = {_per_1k(cpu, fires)} ms per 1,000 fires"
    )
    print(f"\n{'phase':<42} {'samples':>8} {'share':>6} {'ms/1k fires':>12}")
    for phase, count in phases.most_common():
        share = count / samples if samples else 0.0
        print(f"{phase:<42} {count:>8} {share:>6.1%} {_per_1k(share * cpu, fires):>12}")
        for function, own in functions[phase].most_common(arguments.detail):
            print(f"    {own / samples:>6.1%}  {function}")
    print(f"\nSQL per fire, by thread ({fires} fires):")
    for kind in ("statements", "transactions", "held_us"):
        after, before = sql_after.get(kind, {}), sql_before.get(kind, {})
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        total = sum(delta.values())
        by_thread = ", ".join(
            f"{k} {v / fires:.2f}" for k, v in sorted(delta.items(), key=lambda kv: -kv[1]) if v
        )
        label = "transaction time held (us)" if kind == "held_us" else kind
        print(f"  {label}: {total / fires if fires else 0:.2f} ({by_thread})")
    turns = _delta(sql_after, sql_before, "transactions", "MainThread")
    held = _delta(sql_after, sql_before, "held_us", "MainThread")
    if turns:
        print(
            f"  the loop's transactions (claims and their wake-up reads): {turns}, "
            f"{fires / turns:.1f} fires and {held / turns / 1000:.2f} ms held each"
        )


def _delta(
    after: dict[str, dict[str, int]], before: dict[str, dict[str, int]], kind: str, thread: str
) -> int:
    return after.get(kind, {}).get(thread, 0) - before.get(kind, {}).get(thread, 0)


def _phases(raw: Path) -> tuple[Counter[str], dict[str, Counter[str]]]:
    """Samples per phase, and per phase the samples by the innermost frame they were in."""
    phases: Counter[str] = Counter()
    functions: dict[str, Counter[str]] = {p: Counter() for p, _ in PHASES} | {OTHER: Counter()}
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        phase = next((p for p, marks in PHASES if any(m in stack for m in marks)), OTHER)
        phases[phase] += int(count)
        functions[phase][_leaf(stack)] += int(count)
    return phases, functions


def _leaf(stack: str) -> str:
    """The innermost frame, its file shortened to the package it belongs to."""
    frame = stack.rsplit(";", 1)[-1]
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    short = path.split("site-packages/")[-1].split("wt-engine-cost/")[-1]
    return f"{name} ({short})"


def _fires(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.execute(text("PRAGMA busy_timeout = 30000"))
            found = connection.execute(
                select(func.count()).select_from(text("runs")).where(text("attempt > 0"))
            ).scalar_one()
            return int(found)
    finally:
        engine.dispose()


def _per_1k(seconds: float, fires: int) -> str:
    return f"{seconds / fires * 1e6:.0f}" if fires else "-"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=100, help="every-second jobs (100)")
    parser.add_argument(
        "--log-lines", type=int, default=0, help="lines each run writes through its logger (0)"
    )
    parser.add_argument("--fires", type=int, default=1000, help="fires sampled (1000)")
    parser.add_argument("--rate", type=int, default=200, help="samples a second (200)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after the first fire")
    parser.add_argument("--start-timeout", type=float, default=60.0)
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    parser.add_argument(
        "--raw", type=Path, default=None, help="also keep py-spy's raw samples in this file"
    )
    parser.add_argument(
        "--detail", type=int, default=0, help="also print each phase's N costliest functions"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("JOBHOST_BENCH_POSTGRES_URL")
        or os.environ.get("JOBHOST_TEST_POSTGRES_URL")
        or "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    )
    return parser.parse_args()


if __name__ == "__main__":
    main()
