"""Which run an operator's retry retried, and every attempt at a manual run's work.

An operator's retry writes a change-log entry naming the run retried (``before``) and the new
run (``after``): that is the link, read from the job's ``retry`` entries (the change log's
index on job). A manual run has no occurrence to gather its attempts by; its retries share its
idempotency key, ``JOB:manual:ID``, which names the first attempt, and the change log names
the retries since. Reads cost the job's retry entries, never its ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jobhost.records import RunRecord
from jobhost.store.failures import RETRY, retry_links
from jobhost.store.reports import get_run, runs_by_id
from jobhost.store.runtime import job_changes

__all__ = ["manual_attempts", "retried_run"]


def retried_run(connection: Connection, run: RunRecord) -> RunRecord | None:
    """The run ``run`` is an operator's retry of; None when it is no such retry (a first
    attempt, a retry the job's policy queued)."""
    if run.source != "retry":
        return None
    for old, new in _links(connection, run):
        if new == run.id:
            return get_run(connection, old)
    return None


def manual_attempts(connection: Connection, run: RunRecord) -> list[RunRecord]:
    """Every attempt at the manual run ``run``'s work (itself and its retries), first first."""
    first = _first_attempt(connection, run)
    chain = [first.id]
    links = _links(connection, first)
    for old, new in links:
        if old in chain and new not in chain:
            chain.append(new)
    found = {r.id: r for r in runs_by_id(connection, chain)}
    found.setdefault(run.id, run)
    return sorted(found.values(), key=lambda r: (r.attempt, r.queued_at))


def _first_attempt(connection: Connection, run: RunRecord) -> RunRecord:
    key = run.idempotency_key or ""
    prefix = f"{run.job_name}:manual:"
    if key.startswith(prefix) and key[len(prefix) :] != run.id:
        return get_run(connection, key[len(prefix) :]) or run
    return run


def _links(connection: Connection, since: RunRecord) -> Sequence[tuple[str, str]]:
    query = (
        select(job_changes.c.before, job_changes.c.after)
        .where(
            job_changes.c.job_name == since.job_name,
            job_changes.c.action == RETRY,
            job_changes.c.at >= since.queued_at,
        )
        .order_by(job_changes.c.id)
    )
    return retry_links(connection.execute(query))
