"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import groupby
from pathlib import Path

from sqlalchemy.engine import Connection

from jobhost.catalog import Catalog, JobSpec, build_catalog
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope, SupervisedCancellation
from jobhost.envelope.lifecycle import Outcome
from jobhost.envelope.runlog import RunLogWriter
from jobhost.records import Claim, LogLine, chunk
from jobhost.store import Store
from jobhost.store.ledger import append_chunks
from tests.commands import jobhost_command

SAMPLE_PLUGIN = os.path.join(os.path.dirname(__file__), "plugins", "sample_jobs.py")


class ManualClock:
    """An injected clock the test moves by hand."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def sample_catalog(settings: Settings) -> Catalog:
    """The catalog of ``settings`` with installed entry-point plugins left out."""
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    assert catalog.ok, [p.line() for p in catalog.problems]
    return catalog


def run_jobhost(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``jobhost ARGS`` as a subprocess, installed entry-point plugins left out by default."""
    return jobhost_command(
        args, env={**os.environ, "JOBHOST_LOAD_PLUGINS": "", **(env or {})}, cwd=cwd, timeout=60
    )


def run_log_writer(store: Store) -> RunLogWriter:
    """A run-log writer bounded by the settings' defaults, as a host's."""
    return RunLogWriter(store, max_lines=1000, max_bytes=262_144)


def run_through(
    envelope: RunEnvelope,
    claim: Claim,
    spec: JobSpec,
    cancellation: SupervisedCancellation | None = None,
    *,
    flush: float = 11.0,
) -> Outcome:
    """One run as a host's worker and recorder take it (``jobhost.firing.slots``): execute,
    record, settle; then wait up to ``flush`` seconds for its reports to be delivered."""
    finished = envelope.execute(
        claim, spec, cancellation or SupervisedCancellation(), on_stuck=lambda _verdict: None
    )
    (done,) = envelope.record([finished])
    envelope.settle(done)
    envelope.flush_reports(flush)
    return finished.outcome


def append_lines(connection: Connection, lines: Sequence[LogLine]) -> None:
    """Insert kept lines as a host writes them: each run of consecutive numbers of one run as
    one row."""
    # Within such a run, ``seq`` minus the line's place in ``lines`` stays the same.
    groups = groupby(enumerate(lines), key=lambda item: (item[1].run_id, item[1].seq - item[0]))
    rows = []
    for _, group in groups:
        found = [line for _, line in group]
        first = found[0]
        body = [(line.at_us, line.level, line.size, line.message) for line in found]
        rows.append(chunk(first.run_id, first.seq, first.offset, body))
    append_chunks(connection, rows)
