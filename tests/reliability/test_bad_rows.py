"""One host on an SQLite store with one bad thing in it: corrupt rows, an enormous error message,
executor code that never returns. The other jobs run on, and the operator is told."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from jobhost.records import RunRecord
from jobhost.store import create_store_engine
from tests.reliability.harness import Cluster, every_second_jobs, ledger
from tests.reliability.stuck_support import FAST, STUCK, migrated, stuck_effects, stuck_job
from tests.reliability.verdict import judge, read_effects, recorded
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

_SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"
CORRUPT = ["rel.bad-token", "rel.bad-anchor", "rel.bad-lease", "rel.far-lease"]


def test_corrupt_rows_set_their_jobs_aside_the_others_run_and_health_names_them(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    ticks = every_second_jobs(4)
    corrupt = [
        {"name": name, "cron": "* * * * * *"} for name in CORRUPT if name != "rel.bad-anchor"
    ]
    jobs = [*ticks, *corrupt, {"name": "rel.bad-anchor", "interval": "2s"}]
    cluster = make_cluster(f"sqlite:///{path}", jobs, **FAST)
    engine = migrated(path)
    host = cluster.add("replica-0")
    wait_for(
        lambda: {r.job_name for r in ledger(engine)} >= {j["name"] for j in jobs},
        60,
        "every job to run once",
    )
    corrupted_at = datetime.now(UTC)
    _corrupt(path, corrupted_at)
    wait_for(
        lambda: _latest_occurrence(engine) >= corrupted_at + timedelta(seconds=10),
        40,
        "ten seconds of occurrences after the rows were corrupted",
    )
    first = corrupted_at.replace(microsecond=0) + timedelta(seconds=3)
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    effects = read_effects(cluster.effects)
    rows = wait_for(lambda: recorded(ledger(engine), effects), 15, "completed runs recorded")
    verdict = judge(
        rows,
        effects,
        jobs=[j["name"] for j in ticks],
        first=first,
        last=last,
        killed={},
    )
    problems: list[str] = []
    if verdict.unexplained or verdict.misses_by_reason:
        problems.append("the healthy jobs stopped running:\n" + "\n".join(verdict.lines()))
    false_missed = [
        r
        for r in rows
        if r.job_name == "rel.bad-anchor" and r.outcome == "missed" and r.queued_at > corrupted_at
    ]
    if len(false_missed) > 1:
        problems.append(f"rel.bad-anchor: {len(false_missed)} missed rows after the corruption")
    health = cluster.jobhost("health", "--json")
    running_on = {r.job_name for r in rows if r.outcome == "succeeded" and r.queued_at > first}
    problems += _store_integrity_problems(health.returncode, health.stdout, running_on)

    host.stop(15)
    restarted = cluster.add("replica-1")
    try:
        wait_for(
            lambda: _each_succeeded_twice(ledger(engine), "replica-1", ticks),
            40,
            "a host started on the corrupt store to run each healthy job twice",
        )
    except AssertionError as error:
        problems.append(f"{error}; its log ends:\n{restarted.log()[-1500:]}")
    engine.dispose()
    assert not problems, "\n".join([*problems, "log of the first host:", _errors(host.log())])


def test_a_huge_failure_message_does_not_stall_the_other_jobs(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    ticks = every_second_jobs(4)
    big = [
        {
            "name": "rel.fail-300k",
            "cron": "*/4 * * * * *",
            "behaviour": "fail-big",
            "bytes": 300_000,
        },
        {
            "name": "rel.fail-5m",
            "cron": "*/4 * * * * *",
            "behaviour": "fail-big",
            "bytes": 5_000_000,
        },
    ]
    cluster = make_cluster(f"sqlite:///{path}", [*ticks, *big], **FAST)
    engine = migrated(path)
    host = cluster.add("replica-0")
    wait_for(lambda: ledger(engine), 60, "the first run")
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    wait_for(
        lambda: _latest_occurrence(engine) >= first + timedelta(seconds=14),
        45,
        "fourteen seconds of occurrences beside the big failures",
    )
    last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    effects = read_effects(cluster.effects)
    rows = wait_for(lambda: recorded(ledger(engine), effects), 15, "completed runs recorded")
    engine.dispose()
    verdict = judge(
        rows,
        effects,
        jobs=[j["name"] for j in ticks],
        first=first,
        last=last,
        killed={},
    )
    report = "\n".join([*verdict.lines(), "log:", _errors(host.log())])
    assert not verdict.unexplained and not verdict.misses_by_reason, report
    for job in big:
        failed = [r for r in rows if r.job_name == job["name"] and r.outcome == "failed"]
        assert failed and failed[0].error_message, (
            f"{job['name']} has no failure recorded\n{report}"
        )
        assert len(failed[0].error_message) < 100_000, f"{job['name']}: error text stored uncut"


def test_stuck_code_keeps_its_slot_and_lease_and_never_overlaps_itself(
    tmp_path: Path, make_cluster: Callable[..., Cluster]
) -> None:
    path = tmp_path / "store.db"
    cluster = make_cluster(f"sqlite:///{path}", [stuck_job(12), *every_second_jobs(2)], **FAST)
    migrated(path).dispose()
    host = cluster.add("replica-0")
    began = wait_for(
        lambda: stuck_effects(cluster),
        60,
        "the stuck job to begin",
    )[0]
    engine = create_store_engine(f"sqlite:///{path}")
    wait_for(
        lambda: [
            r
            for r in ledger(engine)
            if r.job_name == STUCK and (r.error_message or "").startswith("stuck:")
        ],
        15,
        "the run past its timeout to be marked stuck",
    )
    engine.dispose()
    report = cluster.jobhost("report", "--json")
    health = cluster.jobhost("health", "--json")
    # The stuck code ends after its 12 s; the next run of the job begins only then.
    wait_for(
        lambda: len({e.run_id for e in stuck_effects(cluster)}) >= 2,
        30,
        "the stuck run to end and the next one to begin",
    )
    host.stop(15)
    effects = stuck_effects(cluster)
    spans: dict[str, list[float]] = {}
    for effect in effects:
        spans.setdefault(effect.run_id, []).append(effect.at)
    intervals = sorted((s[0], s[1] if len(s) > 1 else float("inf")) for s in spans.values())
    overlaps = [
        f"a run began {b[0] - began.at:.1f}s in while another ran until "
        + (f"{a[1] - began.at:.1f}s" if a[1] != float("inf") else "the host stopped")
        for a, b in itertools.pairwise(intervals)
        if b[0] < a[1]
    ]
    assert not overlaps, "\n".join([*overlaps, _errors(host.log())])
    assert report.returncode == 0, report.stderr
    entry = next(j for j in json.loads(report.stdout)["jobs"] if j["name"] == STUCK)
    assert "stuck" in json.dumps(entry), f"report does not call the job stuck: {entry}"
    checks = json.loads(health.stdout)["checks"]
    named = [c for c in checks if STUCK in c["detail"] and "stuck" in c["detail"]]
    assert named, f"no health check reports rel.stuck stuck: {checks}"


def _each_succeeded_twice(rows: list[RunRecord], host_id: str, jobs: list[dict[str, Any]]) -> bool:
    done = Counter(r.job_name for r in rows if r.host_id == host_id and r.outcome == "succeeded")
    return all(done[job["name"]] >= 2 for job in jobs)


def _latest_occurrence(engine: Engine) -> datetime:
    occurrences = [r.occurrence for r in ledger(engine) if r.occurrence]
    return max(occurrences, default=datetime.min.replace(tzinfo=UTC))


def _corrupt(path: Path, now: datetime) -> None:
    """Raw SQL, as a hand edit or a broken restore would leave the rows."""
    stamp = now.strftime(_SQLITE_TIME)
    far = datetime(2999, 1, 1, tzinfo=UTC).strftime(_SQLITE_TIME)
    connection = sqlite3.connect(path, timeout=30)
    with connection:
        connection.execute(
            "UPDATE schedules SET fencing_token = 'not-a-number' WHERE job_name = 'rel.bad-token'"
        )
        connection.execute(
            "UPDATE schedules SET interval_anchor = 'yesterday-ish' "
            "WHERE job_name = 'rel.bad-anchor'"
        )
        for run_id, job, lease in (
            ("corrupt-lease-run", "rel.bad-lease", "garbage"),
            ("far-lease-run", "rel.far-lease", far),
        ):
            connection.execute(
                "INSERT INTO runs (id, job_name, occurrence, attempt, source, outcome, host_id, "
                "fencing_token, queued_at, started_at, lease_expires_at) VALUES "
                "(?, ?, '2020-01-01 00:00:00.000000', 1, 'schedule', 'running', 'ghost', 1, "
                "?, ?, ?)",
                (run_id, job, stamp, stamp, lease),
            )
    connection.close()


def _store_integrity_problems(code: int, output: str, running_on: set[str]) -> list[str]:
    """What is wrong with ``jobhost health`` on the corrupt store.

    A corrupt job must be named by the failing ``store-integrity`` check, unless the host
    repaired it and it runs again (``running_on``): then it is neither blocked nor silent. The
    non-numeric fencing token is never repairable and always fails the check.
    """
    try:
        checks = {c["name"]: c for c in json.loads(output)["checks"]}
    except (ValueError, KeyError):
        return [f"`jobhost health --json` printed no checks (exit {code}): {output[-1500:]}"]
    problems: list[str] = []
    if code != 1:
        problems.append(f"`jobhost health` exited {code}, not 1, on a store with corrupt rows")
    check = checks.get("store-integrity")
    if check is None:
        return [*problems, f"`jobhost health` has no store-integrity check: {sorted(checks)}"]
    if check["ok"]:
        problems.append(f"store-integrity passed on corrupt rows: {check['detail']}")
    problems += [
        f"store-integrity does not name {name}, and {name} does not run: {check['detail']}"
        for name in CORRUPT
        if name not in check["detail"] and (name == "rel.bad-token" or name not in running_on)
    ]
    return problems


def _errors(log: str) -> str:
    """The log's warnings and errors, each distinct line once, cut for an assertion message."""
    seen: dict[str, int] = {}
    for line in log.splitlines():
        if " WARNING " in line or " ERROR " in line:
            key = line[24:220]
            seen[key] = seen.get(key, 0) + 1
    return "\n".join(f"{n:4d}x {line}" for line, n in list(seen.items())[:25])
