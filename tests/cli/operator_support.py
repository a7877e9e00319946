"""Driving the operator commands as real processes, with store state built directly.

:class:`Operator` writes a ``jobhost.toml`` for one store (the sample plugin, plus any extra
plugin files), runs ``python -m jobhost --config ... COMMAND`` with installed entry-point plugins
left out, and puts rows in the store through the store's own tables, at instants relative to
the real clock, so no test waits for time to pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select, update

from jobhost.catalog import Catalog, build_catalog
from jobhost.config import Settings, load_settings
from jobhost.records import PRIORITY_MANUAL, HostRecord, RunRecord, ScheduleRecord
from jobhost.rules import desired_schedules
from jobhost.store import create_store_engine, reading
from jobhost.store.registry import sync_schedules
from jobhost.store.schema import hosts, runs, schedules
from tests.commands import jobhost_command
from tests.migrated import migrate as migrate_store
from tests.support import SAMPLE_PLUGIN
from tests.toml_values import toml_value

# A plugin whose job stays disabled until its module's section is configured, like the bundled
# files module, and (with [modules.extra] broken = true) one job whose cron cannot parse.
EXTRA_PLUGIN = """\
from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


@hookimpl
def jobhost_jobs(settings):
    section = settings.get("extra")
    jobs = [
        JobRegistration(
            BackgroundJobDeclaration(
                name="extra.needs-config",
                module="extra",
                cron="0 1 * * *",
                enabled=section is not None,
                configuration_source="extra",
            ),
            Executor(),
        )
    ]
    if section is not None and section.get("broken"):
        jobs.append(
            JobRegistration(
                BackgroundJobDeclaration(name="extra.broken", module="extra", cron="0 61 * * *"),
                Executor(),
            )
        )
    return jobs
"""


def now() -> datetime:
    return datetime.now(UTC)


class Operator:
    """One store, one configuration file, and the ``jobhost`` command against them."""

    def __init__(self, store_url: str, directory: Path) -> None:
        self.url = store_url
        self.directory = directory
        self.config = directory / "jobhost.toml"
        self.run_log = directory / "runs.log"
        self.engine = create_store_engine(store_url)

    def close(self) -> None:
        self.engine.dispose()

    # -- configuration -----------------------------------------------------------------------

    def configure(
        self,
        jobs: Sequence[Mapping[str, Any]],
        *,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        modules: Mapping[str, Mapping[str, Any]] | None = None,
        extra_plugin: bool = False,
        migrate: bool = True,
        **settings: Any,
    ) -> Operator:
        """Write the configuration file; migrate the store unless ``migrate`` is False."""
        plugins = [SAMPLE_PLUGIN]
        if extra_plugin:
            path = self.directory / "extra_plugin.py"
            path.write_text(EXTRA_PLUGIN)
            plugins.append(str(path))
        lines = [f"database_url = {toml_value(self.url)}", f"plugins = {toml_value(plugins)}"]
        lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
        for name, values in (overrides or {}).items():
            lines.append(f'[jobs."{name}"]')
            lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        for module, values in (modules or {}).items():
            lines.append(f"[modules.{module}]")
            lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        lines += ["[modules.sample]", f"log = {toml_value(str(self.run_log))}"]
        for job in jobs:
            lines.append("[[modules.sample.jobs]]")
            lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
        self.config.write_text("\n".join(lines) + "\n")
        if migrate:
            migrate_store(self.engine)
        return self

    @property
    def settings(self) -> Settings:
        return load_settings(self.config)

    def catalog(self) -> Catalog:
        return build_catalog(self.settings, environ={"JOBHOST_LOAD_PLUGINS": ""})

    # -- the command -------------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
        return {**clean, "JOBHOST_LOAD_PLUGINS": "", **extra}

    def jobhost(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return jobhost_command(
            ["--config", str(self.config), *args], env=self.env(), timeout=timeout
        )

    def probed(self, after: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``jobhost ARGS`` in a Python process of its own that runs the statement ``after``
        once the command is over, whichever way it ended (``after`` prints to stderr what the
        test looks at; ``gc`` and ``sys`` are imported)."""
        probe = (
            "import gc, sys\n"
            "from jobhost.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "finally:\n"
            f"    {after}\n"
        )
        return subprocess.run(
            [sys.executable, "-c", probe, "--config", str(self.config), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def json(self, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
        """Run with ``--json`` and parse stdout (None when it is not JSON)."""
        done = self.jobhost(*args, "--json")
        try:
            return done, json.loads(done.stdout)
        except json.JSONDecodeError:
            return done, None

    # -- store state -------------------------------------------------------------------------

    def sync(self, *, leave_out: Sequence[str] = ()) -> None:
        """Schedule the catalog's jobs as a starting host would, except ``leave_out``."""
        jobs = {n: s for n, s in self.catalog().jobs.items() if n not in leave_out}
        with self.engine.begin() as connection:
            sync_schedules(connection, desired_schedules(jobs), now())

    def schedule(self, job: str) -> ScheduleRecord | None:
        with reading(self.engine) as connection:
            row = connection.execute(
                select(schedules).where(schedules.c.job_name == job)
            ).mappings()
            found = row.first()
        return ScheduleRecord.from_row(found) if found is not None else None

    def set_schedule(self, job: str, **values: Any) -> None:
        with self.engine.begin() as connection:
            result = connection.execute(
                update(schedules).where(schedules.c.job_name == job).values(**values)
            )
            assert result.rowcount == 1, f"no schedule row for {job}"

    def add_orphan(self, job: str, module: str = "sample") -> None:
        """A schedule row for a job no configured module declares."""
        at = now() - timedelta(days=1)
        with self.engine.begin() as connection:
            connection.execute(
                schedules.insert().values(
                    job_name=job,
                    module=module,
                    trigger_kind="interval",
                    trigger_expression="1h",
                    timezone="UTC",
                    trigger_source="declaration",
                    enabled=True,
                    orphaned=True,
                    paused=False,
                    fencing_token=0,
                    created_at=at,
                    updated_at=at,
                )
            )

    def add_host(
        self,
        host_id: str,
        *,
        seen: datetime | None = None,
        skew: float = 0.0,
        heartbeat: int = 5,
        stopped: bool = False,
    ) -> None:
        """A host row as a heartbeat would leave it; ``skew`` is its clock minus the store's."""
        at = seen or now()
        with self.engine.begin() as connection:
            connection.execute(
                hosts.insert().values(
                    id=host_id,
                    hostname="box",
                    pid=4242,
                    version="0.1.0",
                    started_at=at - timedelta(minutes=5),
                    last_seen_at=at,
                    host_clock_at=at + timedelta(seconds=skew),
                    heartbeat_seconds=heartbeat,
                    stopped_at=at if stopped else None,
                )
            )

    def add_run(
        self,
        job: str,
        outcome: str,
        *,
        started: datetime | None = None,
        took: timedelta = timedelta(seconds=2),
        occurrence: datetime | None = None,
        attempt: int = 1,
        source: str = "schedule",
        host: str | None = "replica-0",
        reason: str | None = None,
        error: str | None = None,
        trace_id: str | None = None,
        lease_expires_at: datetime | None = None,
    ) -> str:
        """A ledger row; a ``missed`` or ``skipped`` one has attempt 0 and never started."""
        run_id = uuid.uuid4().hex
        not_attempt = outcome in {"missed", "skipped"}
        start = None if not_attempt else (started or now())
        recorded = started or now()
        finished = None if outcome in {"running", "pending"} else (start or recorded)
        if start is not None and finished is not None:
            finished = start + took
        with self.engine.begin() as connection:
            connection.execute(
                runs.insert().values(
                    id=run_id,
                    job_name=job,
                    occurrence=occurrence,
                    attempt=0 if not_attempt else attempt,
                    source=source,
                    outcome=outcome,
                    reason=reason,
                    host_id=host,
                    queued_at=recorded,
                    started_at=start,
                    finished_at=finished,
                    lease_expires_at=lease_expires_at,
                    error_type="Failure" if error else None,
                    error_message=error,
                    trace_id=trace_id,
                )
            )
            if finished is not None and start is not None:
                _summarise(connection, job, run_id, outcome, start, finished, error)
        return run_id

    def live_hosts(self) -> list[str]:
        """The ids of the hosts alive now, as the report would list them."""
        with reading(self.engine) as connection:
            rows = connection.execute(select(hosts).order_by(hosts.c.id)).mappings()
            records = [HostRecord.from_row(r) for r in rows]
        at = now()
        return [record.id for record in records if record.alive(at)]

    def runs(self, job: str | None = None) -> list[RunRecord]:
        query = select(runs).order_by(runs.c.queued_at)
        if job is not None:
            query = query.where(runs.c.job_name == job)
        with reading(self.engine) as connection:
            return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]

    def requests(self) -> list[RunRecord]:
        """The manual runs operators asked for (a request is its run), oldest first."""
        query = select(runs).where(runs.c.priority == PRIORITY_MANUAL).order_by(runs.c.queued_at)
        with reading(self.engine) as connection:
            return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


def codes(job: Mapping[str, Any]) -> list[str]:
    """The codes of a report job's ``mismatch`` reasons (``code: detail``)."""
    return [reason.split(":", 1)[0] for reason in job["mismatch"]]


def _summarise(
    connection: Any,
    job: str,
    run_id: str,
    outcome: str,
    started: datetime,
    finished: datetime,
    error: str | None,
) -> None:
    """Keep the job's last-run summary on its schedule row as recording a run does, when this
    attempt is its newest (the overview and the gauges read it)."""
    newer = (schedules.c.last_finished_at.is_(None)) | (schedules.c.last_finished_at <= finished)
    values: dict[str, Any] = {
        "last_run_id": run_id,
        "last_outcome": outcome,
        "last_started_at": started,
        "last_finished_at": finished,
        "last_error": error,
    }
    connection.execute(update(schedules).where(schedules.c.job_name == job, newer).values(**values))
    if outcome == "succeeded":
        later = schedules.c.last_success_at.is_(None) | (schedules.c.last_success_at < finished)
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == job, later)
            .values(last_success_at=finished)
        )
