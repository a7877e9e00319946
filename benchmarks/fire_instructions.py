"""Instructions per fire, counted by valgrind: ``python benchmarks/fire_instructions.py``.

On a shared machine the CPU seconds of a run move by 15% from one run to the next, more than
most single changes to the engine win. An instruction count does not: valgrind's callgrind
counts what the process executes, whatever else the machine does. This script drives the path
of a fire in one process, as a busy host does it (claims of 40 due runs, each run executed in
its envelope, outcomes recorded 80 to a transaction, reported through the audit line and the
metrics), for N every-second jobs on a clock it moves by hand, and counts the instructions of
two runs that differ only in the seconds fired: their difference over the fires in between is
the cost of a fire, with start-up taken out. The store's own work is counted on SQLite (it runs
in the process) and not on PostgreSQL (it runs in the server).

``--peer DIR`` counts a second checkout's engine (its ``jobhost`` and ``contracts``) the same
way and prints the ratio: ``git worktree add /tmp/before HEAD~3`` and ``--peer /tmp/before``.
valgrind slows the process fifty-fold: the defaults take a few minutes a store and checkout.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
_PLUGIN = HERE / "_scale_plugin.py"
_CLAIM = 40
_RECORD = 80


def main() -> None:
    arguments = _arguments()
    if arguments.cycle:
        _cycle(arguments.store, arguments.jobs, arguments.cycle, arguments.postgres_url)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    checkouts = {"this checkout": None}
    if arguments.peer:
        checkouts["peer " + arguments.peer] = Path(arguments.peer).resolve()
    short, long = arguments.seconds
    print(
        f"instructions per fire: {arguments.jobs} every-second jobs, claims of {_CLAIM}, "
        f"{_RECORD} outcomes a transaction; runs of {short} and {long} seconds, their difference "
        f"over {(long - short) * arguments.jobs} fires"
    )
    for store in arguments.stores.split(","):
        counts: dict[str, float] = {}
        for name, peer in checkouts.items():
            runs = [_count(store, arguments, seconds, peer) for seconds in (short, long)]
            counts[name] = (runs[1] - runs[0]) / ((long - short) * arguments.jobs)
            print(f"  {store:8} {name:40} {counts[name] / 1e6:8.3f} M instructions / fire")
        if len(counts) == 2:
            mine, theirs = counts.values()
            print(f"  {store:8} this checkout / peer: {mine / theirs:.3f}")


def _count(store: str, arguments: argparse.Namespace, seconds: int, peer: Path | None) -> int:
    """Instructions of one ``--cycle`` run under callgrind."""
    env = dict(os.environ)
    if peer is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(peer), str(peer / "contracts")])
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--store",
        store,
        "--jobs",
        str(arguments.jobs),
        "--cycle",
        str(seconds),
        "--postgres-url",
        arguments.postgres_url,
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        sys.exit(f"the {store} run of {seconds}s failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def _cycle(store: str, jobs: int, seconds: int, postgres_url: str) -> None:
    """Fire ``jobs`` every-second jobs for ``seconds`` seconds of a hand-moved clock."""
    from jobhost.catalog import build_catalog
    from jobhost.config import Settings
    from jobhost.envelope.envelope import RunEnvelope, SupervisedCancellation
    from jobhost.envelope.lifecycle import Finished
    from jobhost.envelope.reporting import configure_telemetry
    from jobhost.envelope.runlog import RunLogWriter
    from jobhost.firing.tick import Ticker
    from jobhost.store import Store

    directory = Path(tempfile.mkdtemp(prefix="jobhost-instructions-"))
    url, drop = _private_store(store, postgres_url, directory)
    settings = Settings(
        database_url=url,
        plugins=[str(_PLUGIN)],
        modules={"bench": {"jobs": jobs, "log_dir": str(directory)}},
        log_level="WARNING",
    )
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    moment = [datetime(2026, 1, 5, 12, 0, tzinfo=UTC)]

    def clock() -> datetime:
        return moment[0]

    store = Store.open(url, clock)
    store.upgrade()

    telemetry = configure_telemetry()
    ticker = Ticker(
        store,
        catalog.jobs,
        host_id="instructions",
        lease_duration=settings.lease_duration,
        telemetry=telemetry,
    )
    envelope = RunEnvelope(
        store,
        host_id="instructions",
        grace=timedelta(seconds=1),
        telemetry=telemetry,
        run_logs=RunLogWriter(
            store, max_lines=settings.run_log_lines, max_bytes=settings.run_log_bytes
        ),
        store_time=clock,
    )

    def record(batch: list[Finished]) -> None:
        for done in envelope.record(batch, isolate=False):
            envelope.settle(done)

    ticker.sync(clock())
    try:
        for _ in range(seconds):
            moment[0] += timedelta(seconds=1)
            finished: list[Finished] = []
            while claims := ticker.tick(clock(), _CLAIM, 0).claims:
                for claim, spec in claims:
                    # As a host's worker executes it, under the supervisor.
                    cancellation = SupervisedCancellation()
                    finished.append(
                        envelope.execute(claim, spec, cancellation, on_stuck=lambda _verdict: None)
                    )
                if len(finished) >= _RECORD:
                    record(finished)
                    finished = []
            record(finished)
        envelope.flush_reports(30)
    finally:
        store.dispose()
        drop()
        shutil.rmtree(directory, ignore_errors=True)


def _private_store(
    store: str, postgres_url: str, directory: Path
) -> tuple[str, Callable[[], None]]:
    """A store of its own for one run: its URL, and what drops it after."""
    if store != "postgres":
        return f"sqlite:///{directory}/store.db", lambda: None
    from sqlalchemy import create_engine, make_url, text

    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    database = f"instructions_{os.getpid()}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{database}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{database}" WITH (FORCE)'))
        admin.dispose()

    url = make_url(postgres_url).set(database=database)
    return url.render_as_string(hide_password=False), drop


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--jobs", type=int, default=200, help="every-second jobs (200)")
    parser.add_argument(
        "--seconds",
        type=lambda text: tuple(int(part) for part in text.split(",")),
        default=(1, 4),
        help="the two runs' seconds, e.g. 1,4 (the default)",
    )
    parser.add_argument("--peer", help="another checkout to count beside this one")
    parser.add_argument(
        "--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--cycle", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    main()
