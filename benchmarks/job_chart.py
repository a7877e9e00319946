"""One job's runs-by-outcome chart, this checkout beside another, at 10,000 jobs:
``python benchmarks/job_chart.py [sqlite|postgres ...]`` with ``OLD_CHART=/path/to/checkout``.

Seeds one store per backend once (``CHART_ROWS`` runs, default 1,000,000, finished over the
last 24 hours across 10,000 jobs, as ``benchmarks/outcome_chart.py`` seeds them, plus
``busy.minutely``: one run a minute for 30 days), then measures each checkout in its own
process, alternating old, new, old, new (``ROUNDS``), on the same store in the same hour. Each
process asks a quiet job's and the busy job's chart for every range of the job page (1 h 12
bars, 24 h 24, 7 d 28, 30 d 30):

- ``first``: the first chart after the process starts;
- ``same``: best of ``REPEAT`` at the same ``now``;
- ``moving``: best of ``REPEAT`` with ``now`` a minute later each time (the dashboard's case:
  every request sees a minute the chart has not counted before);

and the statements each ``moving`` request sent. Printed: old and new figures side by side,
in ms, with old / new.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console import _store  # type: ignore[import-not-found]
from outcome_chart import _rows  # type: ignore[import-not-found]
from outcome_chart import _seed as _seed_runs  # type: ignore[import-not-found]
from sqlalchemy import event
from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.outcome_counts import outcome_counts

ROUNDS = int(os.environ.get("ROUNDS", "2"))
REPEAT = 5
RANGES = {"1h": (timedelta(hours=1), 12), "24h": (timedelta(hours=24), 24)}
RANGES |= {"7d": (timedelta(days=7), 28), "30d": (timedelta(days=30), 30)}
JOBS = ("job-00042", "busy.minutely")
HERE = Path(__file__).resolve().parent


def main(backends: list[str]) -> None:
    old = os.environ.get("OLD_CHART")
    if not old:
        raise SystemExit("set OLD_CHART to the checkout to compare with")
    checkouts = {"old": Path(old), "new": HERE.parent}
    for backend in backends or ["sqlite", "postgres"]:
        with tempfile.TemporaryDirectory() as directory, _store(backend, directory) as url:
            now = datetime.now(UTC).replace(second=0, microsecond=0)
            started = time.perf_counter()
            _seed(url, now)
            print(f"{backend}: seeded in {time.perf_counter() - started:.0f} s, now {now:%H:%M}Z")
            figures: dict[str, list[dict[str, dict[str, float]]]] = {"old": [], "new": []}
            for round_ in range(ROUNDS):
                for name, root in checkouts.items():
                    # Each round's requests start later, so ``moving`` always meets new minutes.
                    at = now + timedelta(minutes=(2 * round_ + len(figures[name])) * 20)
                    figures[name].append(_run(root, url, at))
            _print(backend, figures)


def _run(root: Path, url: str, now: datetime) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=f"{root}:{root / 'contracts'}")
    command = [sys.executable, str(Path(__file__)), "--measure", url, now.isoformat()]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=HERE)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _print(backend: str, figures: dict[str, list[dict[str, dict[str, float]]]]) -> None:
    print(f"  {'job, range':22} {'first old/new':>16} {'same old/new':>16} {'moving old/new':>16}")
    for case in figures["new"][0]:
        cells = []
        for what in ("first", "same", "moving"):
            old = min(one[case][what] for one in figures["old"])
            new = min(one[case][what] for one in figures["new"])
            cells.append(f"{old:6.1f} {new:6.1f} {old / new:5.1f}x")
        sent = [int(figures[name][0][case]["statements"]) for name in ("old", "new")]
        print(f"  {case:22} " + "  ".join(cells) + f"  statements {sent[0]} / {sent[1]}")
    print(f"  load: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} on {os.cpu_count()} cores")


def _measure(url: str, now: datetime) -> None:
    engine = create_store_engine(url)
    sent = [0]

    @event.listens_for(engine, "before_cursor_execute")
    def _count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        # SQLite's BEGIN opens the reading transaction every page has; not the chart's.
        if not statement.startswith("BEGIN"):
            sent[0] += 1

    out: dict[str, dict[str, float]] = {}
    for job in JOBS:
        for name, (span, slices) in RANGES.items():
            out[f"{job} {name}"] = _one(engine, job, span, slices, now=now, sent=sent)
    engine.dispose()
    print(json.dumps(out))


def _one(
    engine: Engine, job: str, span: timedelta, slices: int, *, now: datetime, sent: list[int]
) -> dict[str, float]:
    def chart(at: datetime) -> float:
        started = time.perf_counter()
        with reading(engine) as connection:
            outcome_counts(connection, at - span, at, slices, job, now=at)
        return (time.perf_counter() - started) * 1000

    first = chart(now)
    same = min(chart(now) for _ in range(REPEAT))
    moving = []
    for step in range(1, REPEAT + 1):
        before = sent[0]
        moving.append(chart(now + timedelta(minutes=step)))
        statements = sent[0] - before
    return {"first": first, "same": same, "moving": min(moving), "statements": statements}


def _seed(url: str, now: datetime) -> None:
    engine = create_store_engine(url)
    upgrade(engine)
    _seed_runs(engine, _all_rows(now))
    engine.dispose()


def _all_rows(now: datetime) -> Iterator[tuple[object, ...]]:
    yield from _rows(now)
    for minute in range(30 * 24 * 60):
        finished = now - timedelta(minutes=minute, seconds=30)
        outcome = "failed" if minute % 50 == 0 else "succeeded"
        started = finished - timedelta(seconds=5)
        yield (
            uuid.uuid4().hex,
            "busy.minutely",
            started,
            1,
            "schedule",
            outcome,
            "bench-host",
            minute,
            started,
            started,
            finished,
            None,
            None,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        _measure(sys.argv[2], datetime.fromisoformat(sys.argv[3]))
    else:
        main(sys.argv[1:])
