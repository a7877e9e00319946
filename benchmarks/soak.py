"""Soak: three replicas on PostgreSQL under faults for as long as asked, then the verdict.

    python benchmarks/soak.py --minutes 5

Three ``jobhost run`` processes share a fresh schema on the server named by
``JOBHOST_TEST_POSTGRES_URL`` (or ``--database``), through a TCP proxy this script owns. Every
second each of ``--jobs`` jobs fires once, and four more jobs run for 2 s every 3 s, so that
runs are in flight whenever a fault hits. One replica's clock runs ``--clock-ahead`` ahead (the
``clock_offset`` setting). On a repeating cycle one replica is killed with ``kill -9`` and
restarted under its old host id, alternately five seconds later and half a second later (before
anyone can see it dead: only its new process can settle the old one's runs), and the proxy cuts
the database for ``--outage`` seconds (the server itself is never touched). At the end every
replica is stopped and the script prints: duplicates (an occurrence executed twice, or recorded
both run and not run), unexplained misses, misses by reason, outcomes lost (an executor
completed in a host that lived on, and the ledger does not hold its outcome), audit records that
disagree with the ledger, RSS per replica process at
start and end, and the runs left ``running`` at the end (the runs of a dead process its restart
did not settle). The exit status is 1 when any of the first three, or the last, is not zero.

The harness is the reliability suite's (``tests/reliability/harness.py``): one copy of it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy.engine import make_url  # noqa: E402

from tests.reliability.harness import (  # noqa: E402
    Cluster,
    Memory,
    every_second_jobs,
    ledger,
    private_schema,
    run_faults,
    slow_jobs,
    through_proxy,
)
from tests.reliability.proxy import CutProxy  # noqa: E402
from tests.reliability.verdict import judge, log_kinds, read_effects  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

_DEFAULT_DATABASE = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    database = options.database or os.environ.get("JOBHOST_TEST_POSTGRES_URL", _DEFAULT_DATABASE)
    server = make_url(database)
    directory = Path(tempfile.mkdtemp(prefix="jobhost-soak-"))
    seconds = options.minutes * 60
    _say(
        f"soak: {options.jobs} every-second jobs, 3 replicas (replica-2 clock "
        f"+{options.clock_ahead}s), {seconds:g}s of faults, outage {options.outage:g}s "
        f"every {options.cycle:g}s; files in {directory}"
    )
    with (
        private_schema(database) as (url, engine),
        CutProxy(server.host or "127.0.0.1", server.port or 5432) as proxy,
    ):
        jobs = every_second_jobs(options.jobs)
        cluster = Cluster(
            directory,
            through_proxy(url, proxy),
            [*jobs, *slow_jobs(4)],
            heartbeat_interval="1s",
            lease_duration="5s",
            shutdown_grace="5s",
        )
        try:
            cluster.add("replica-0")
            cluster.add("replica-1")
            cluster.add("replica-2", JOBHOST_CLOCK_OFFSET=f"{options.clock_ahead}s")
            wait_for(
                lambda: len({r.host_id for r in ledger(engine)}) == 3, 90, "all three replicas"
            )
            memory = Memory(cluster)
            timeline = _Timeline(cluster, options.rss_every * 60)
            first = datetime.fromtimestamp(math.ceil(time.time()), UTC)
            run_faults(
                cluster,
                proxy,
                seconds,
                outage=options.outage,
                cycle=options.cycle,
                say=_say,
                every_second=lambda: (memory.sample(), timeline.sample()),
                restart_after=(5.0, 0.5),
            )
            last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=3)
            memory.sample()
            time.sleep(7)  # the killed replica's last runs expire and are recorded
        finally:
            cluster.stop()
        rows = ledger(engine)
        verdict = judge(
            rows,
            read_effects(cluster.effects),
            jobs=[job["name"] for job in jobs],
            first=first,
            last=last,
            killed=cluster.killed(),
            logs=cluster.logs(),
        )
    logs = cluster.logs()
    _say(f"window {first:%H:%M:%S} .. {last:%H:%M:%S} UTC")
    for line in verdict.lines():
        _say(line)
    left = [r for r in rows if r.outcome == "running"]
    restarted = [r for r in rows if "restarted" in (r.error_message or "")]
    _say(f"runs settled by a restart under the same host id: {len(restarted)}")
    _say(f"runs left running after every replica stopped: {len(left)}")
    _say("RSS per replica process (first sample 10 s after start, last before stop):")
    for line in memory.lines():
        _say(line)
    _say(f"log: {logs.count('Traceback')} tracebacks; warnings and errors by kind:")
    for kind, count in log_kinds(logs).most_common(12):
        _say(f"  {count:6d}  {kind}")
    bad = verdict.duplicates or verdict.unexplained or verdict.outcomes_lost or left
    return 1 if bad else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the faults go on")
    parser.add_argument("--jobs", type=int, default=40, help="every-second jobs (fires per second)")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds each outage lasts")
    parser.add_argument("--cycle", type=float, default=75.0, help="seconds between fault rounds")
    parser.add_argument("--clock-ahead", type=int, default=20, help="replica-2's clock offset")
    parser.add_argument("--database", help="PostgreSQL URL (default: JOBHOST_TEST_POSTGRES_URL)")
    parser.add_argument(
        "--rss-every", type=float, default=10.0, help="minutes between two lines of RSS figures"
    )
    return parser


class _Timeline:
    """Prints every replica's RSS every ``every`` seconds, so a long soak shows whether memory
    levels off after warm-up rather than only where it started and ended."""

    def __init__(self, cluster: Cluster, every: float) -> None:
        self._cluster = cluster
        self._every = every
        self._began = time.monotonic()
        self._next = every

    def sample(self) -> None:
        elapsed = time.monotonic() - self._began
        if elapsed < self._next:
            return
        self._next += self._every
        figures = ", ".join(
            f"{r.host_id} {r.rss_mb():.1f} MB (pid {r.pid})" for r in self._cluster.replicas
        )
        _say(f"{elapsed / 60:6.1f} min RSS: {figures}")


def _say(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
