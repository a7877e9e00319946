"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from jobhost.catalog import Catalog, JobSpec, build_catalog
from jobhost.config import Settings
from jobhost.envelope.envelope import RunEnvelope, SupervisedCancellation
from jobhost.envelope.lifecycle import Outcome
from jobhost.envelope.runlog import RunLogWriter
from jobhost.records import Claim
from jobhost.store import Store
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
