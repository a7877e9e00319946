"""The release gate: named checks, each passing or failing with the reason why.

The checks run in the order :func:`check_health` lists them; those that need the store fail as
"not checked" when the store check fails. A failing detail names at most ten jobs (or hosts, or
problems), then how many more there are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from jobhost.catalog import Catalog
from jobhost.config import Settings, format_duration, redact_text, redact_url
from jobhost.errors import SchemaTooNewError
from jobhost.operations.failures import open_failure_lines
from jobhost.operations.jobs import stored_version
from jobhost.operations.report import Report, StoredJobs, report_from, stored_jobs
from jobhost.operations.timefmt import duration_text, short_utc
from jobhost.rules import FiringRules
from jobhost.store import Store, StoreError, head_revision
from jobhost.store.engine import sqlite_path
from jobhost.store.integrity import HealthRows
from jobhost.store.migrate import is_current
from jobhost.store.snapshot import Census

__all__ = ["Check", "Health", "check_health"]

_MAX_CLOCK_SKEW_SECONDS = 1.0
_UNCHECKED = "not checked: the store is unavailable"
# Open failures of critical jobs read for the check: enough to name them, bounded.
_OPEN_SHOWN = 50
# A detail is read by a person: at ten thousand jobs a full list is a wall of text.
_SHOWN = 10


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Health:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(check) for check in self.checks]}


def check_health(
    settings: Settings,
    catalog: Catalog | None,
    store: Store,
    *,
    hosts: bool = True,
) -> Health:
    """Run every check against ``store`` (whose schema may be missing or old); with ``catalog``
    None, against the store's own catalog (its rows' declarations), loading no plugin."""
    reached = _store(settings, store)
    checks = [reached, _catalog(catalog) if catalog is not None else _UNREAD]
    report: Report | None = None
    stored: StoredJobs | None = None
    if reached.ok:
        try:
            if catalog is None:
                stored, version, report = _stored_report(settings, store)
                checks[1] = _stored_catalog(stored, version)
            else:
                report = report_from(settings, catalog, store.read_snapshot(catalog.jobs))
        except StoreError as error:
            checks[0] = Check("store", False, _unreachable(settings, error))
    # The last three checks read the store's rows beside the report once, together.
    rows = functools.cache(
        lambda: store.health_rows(
            _implausible(settings, catalog, stored), checks=True, hosts="alive"
        )
    )
    rest: list[tuple[str, Callable[[Report], _Verdict]]] = [
        ("critical-jobs-scheduled", _critical_scheduled),
        ("live-host", _live_host),
        ("leases", _leases),
        ("critical-jobs-last-run", lambda found: _critical_last_run(found, store)),
        ("clock-skew", _clock_skew),
        ("schedule-lag", lambda _: _schedule_lag(settings, *rows())),
        ("store-integrity", lambda _: _store_integrity(rows()[1])),
        ("stuck-runs", lambda _: _stuck_runs(rows()[1])),
    ]
    for name, check in rest:
        if not hosts and name == "live-host":
            checks.append(Check(name, True, "skipped (--no-hosts)"))
        elif report is not None:
            checks.append(Check(name, *check(report)))
        else:
            checks.append(Check(name, False, _UNCHECKED))
    return Health(checks)


_Verdict = tuple[bool, str]
"""Whether a check passed, and the detail that says why."""


def _stored_report(settings: Settings, store: Store) -> tuple[StoredJobs, str | None, Report]:
    """The store's catalog as the checks ask it, the version it holds, and the report of the
    jobs the checks look at (the critical ones and those holding an expired lease): only those
    are read whole, with their ledger."""
    found: list[tuple[StoredJobs, str | None]] = []

    def looked_at(census: Census) -> list[str]:
        jobs = stored_jobs(settings, census.declared, census.rows)
        found.append((jobs, stored_version(census.versions)))
        return sorted({*jobs.critical, *census.held})

    snapshot = store.read_snapshot((), jobs_of=looked_at)
    jobs, version = found[0]
    return jobs, version, report_from(settings, None, snapshot)


def _implausible(settings: Settings, catalog: Catalog | None, jobs: StoredJobs | None) -> timedelta:
    """How far ahead a stored lease may be before no renewal set it (as the hosts judge it)."""
    if catalog is not None:
        return FiringRules(catalog.jobs, settings.lease_duration).implausible_lease
    longest = settings.lease_duration
    if jobs is not None and jobs.longest_lease is not None:
        longest = max(longest, jobs.longest_lease)
    return 4 * longest


def _store_integrity(found: HealthRows) -> _Verdict:
    result = found.integrity
    covered = f"checked {result.coverage()}"
    if not result.total:
        return True, (
            f"{covered}: every one is readable (finished runs and the other tables: "
            "jobhost db check --full)"
        )
    shown = "; ".join(row.line() for row in result.found)
    hidden = result.total - len(result.found)
    more = f" (and {hidden} more)" if hidden > 0 else ""
    return False, (
        f"{result.total} row(s) the hosts cannot use; their jobs are set aside: {shown}{more} "
        f"({covered})"
    )


def _stuck_runs(found: HealthRows) -> _Verdict:
    stuck = found.stuck
    if not stuck:
        return True, "no run is stuck in code that ignores cancellation"
    shown = _listed(
        [
            (
                run.job_name,
                f"{run.job_name} run {run.id} on host {run.host_id} since "
                f"{short_utc(run.started_at)} is stuck: its executor ignored cancellation and "
                "its thread still runs",
            )
            for run in stuck
        ]
    )
    return False, (
        f"{shown}; it keeps its slot and lease until the thread ends: fix the executor to "
        "check context.cancellation, and restart that host to free the slot"
    )


def _schedule_lag(settings: Settings, now: datetime, found: HealthRows) -> _Verdict:
    limit = settings.max_schedule_lag
    hosts, oldest = found.hosts, found.oldest_due
    lags = ", ".join(
        f"{h.id} {h.schedule_lag_seconds:.1f}s" for h in hosts if h.schedule_lag_seconds is not None
    )
    per_host = f"; hosts: {lags}" if lags else ""
    behind = (now - oldest) if oldest is not None and oldest <= now else timedelta(0)
    age = f"{duration_text(behind)} old (limit {format_duration(limit)})"
    if behind > limit:
        return False, (
            f"the oldest due, unclaimed occurrence is {age}: the hosts are falling behind; add "
            f"replicas or raise worker_pool_size, or start a host if none runs{per_host}"
        )
    return True, f"oldest due, unclaimed occurrence {age}{per_host}"


def _store(settings: Settings, store: Store) -> Check:
    path = sqlite_path(settings.database_url)
    head = head_revision()
    try:
        if path is not None and not path.exists():
            detail = (
                f"no store at {path}: the file does not exist; fix database_url, or create the "
                "store with `jobhost db upgrade`"
            )
        elif not is_current(current := store.current_revision()):
            detail = (
                f"schema at revision {current or 'none'}, this version needs {head}: run "
                "`jobhost db upgrade`"
            )
        else:
            return Check("store", True, f"reachable, schema at revision {head}")
    except StoreError as error:
        detail = _unreachable(settings, error)
    except SchemaTooNewError as error:
        detail = str(error)
    return Check("store", False, detail)


def _unreachable(settings: Settings, error: StoreError) -> str:
    message = redact_text(str(error.orig) if error.orig else str(error)).strip()
    return f"cannot reach {redact_url(settings.database_url)}: {message.splitlines()[0]}"


def _stored_catalog(jobs: StoredJobs, version: str | None) -> Check:
    held = f"catalog version {version}" if version is not None else "no synced catalog"
    return Check(
        "catalog",
        True,
        f"the store holds {held}, {jobs.count} jobs (read from the store; "
        "--check-catalog loads the modules and validates them)",
    )


# Without --check-catalog the catalog is the store's: not known while the store is not.
_UNREAD = Check("catalog", False, _UNCHECKED)


def _catalog(catalog: Catalog) -> Check:
    if catalog.ok:
        return Check("catalog", True, f"{len(catalog.jobs)} jobs, no problems")
    lines = _listed([(str(n), problem.line()) for n, problem in enumerate(catalog.problems)])
    return Check("catalog", False, f"{len(catalog.problems)} problem(s): {lines}")


def _critical_scheduled(report: Report) -> _Verdict:
    critical = [job for job in report.jobs if job.critical]
    if not critical:
        return _NO_CRITICAL
    failures: list[tuple[str, str]] = []
    for job in critical:
        if not job.enabled:
            failures.append((job.name, f"{job.name} is disabled"))
        if (paused := job.has("paused")) is not None:
            failures.append((job.name, f"{job.name} is paused {paused.detail}"))
        if job.enabled and job.next_fire is None:
            failures.append((job.name, f"{job.name} has no next fire"))
        elif job.has("next-fire-past") is not None:
            failures.append(
                (job.name, f"{job.name}'s next fire {short_utc(job.next_fire)} is in the past")
            )
    return _verdict(failures, f"{len(critical)} critical job(s) enabled, not paused, scheduled")


_NO_CRITICAL = (True, "no critical jobs are declared")


def _live_host(report: Report) -> _Verdict:
    if not report.hosts:
        return False, "no host is alive: nothing fires the jobs"
    ids = ", ".join(host.id for host in report.hosts)
    return True, f"{len(report.hosts)} live: {ids}"


def _leases(report: Report) -> _Verdict:
    held = [
        (job.name, f"{job.name}: {m.detail}")
        for job in report.jobs
        if (m := job.has("lease-expired"))
    ]
    return _verdict(held, "no expired lease is held")


def _critical_last_run(report: Report, store: Store) -> _Verdict:
    critical = [job for job in report.jobs if job.critical]
    if not critical:
        return _NO_CRITICAL
    failures = open_failure_lines(store, [job.name for job in critical], _OPEN_SHOWN)
    for job in critical:
        if (overdue := job.has("overdue")) is not None:
            failures.append((job.name, f"{job.name} is overdue: {overdue.detail}"))
    return _verdict(failures, f"{len(critical)} critical job(s): no open failure, none overdue")


def _clock_skew(report: Report) -> _Verdict:
    if not report.hosts:
        return True, "no live host to compare"
    off = [
        (host.id, f"host {host.id} is {host.clock_skew_seconds:+.3f}s off the database's clock")
        for host in report.hosts
        if abs(host.clock_skew_seconds) > _MAX_CLOCK_SKEW_SECONDS
    ]
    worst = max(abs(host.clock_skew_seconds) for host in report.hosts)
    return _verdict(off, f"every live host within {worst:.3f}s of the database")


def _verdict(failures: list[tuple[str, str]], passed: str) -> _Verdict:
    return (False, _listed(failures)) if failures else (True, passed)


def _listed(failures: list[tuple[str, str]]) -> str:
    subjects = list(dict.fromkeys(subject for subject, _ in failures))
    shown = set(subjects[:_SHOWN])
    text = "; ".join(line for subject, line in failures if subject in shown)
    hidden = len(subjects) - len(shown)
    return f"{text}; and {hidden} more" if hidden > 0 else text
