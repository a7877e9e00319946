"""Concurrency groups at the command line: the catalog's checks, and a trigger on a full group."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobhost.config import load_settings
from jobhost.envelope.reporting import Telemetry
from jobhost.firing.tick import Ticker
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.console.pages import Console
from tests.cli.test_validate_cli import environment, jobhost, plugin
from tests.support import SAMPLE_PLUGIN, run_jobhost, sample_catalog
from tests.web.console_support import Client

_JOB = 'name="warehouse.export", module="warehouse", cron="0 3 * * *"'


def test_a_group_without_a_limit_is_a_problem_naming_the_fix(tmp_path: Path) -> None:
    path = plugin(tmp_path, f'{_JOB}, concurrency_group="warehouse"')
    done = jobhost(environment(tmp_path, path), "validate")
    assert done.returncode == 3, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("warehouse.export (module warehouse) [unknown-concurrency-group]: ")
    assert "add 'warehouse = N' under [concurrency_limits]" in first
    assert "the declaration in module warehouse" in first


def test_an_override_puts_a_job_in_a_group_and_a_typo_is_caught(tmp_path: Path) -> None:
    path = plugin(tmp_path, _JOB)
    config = '[concurrency_limits]\nwarehouse = 2\n[jobs."warehouse.export"]\n'
    done = jobhost(
        environment(tmp_path, path, config + 'concurrency_group = "warehose"\n'), "validate"
    )
    assert done.returncode == 3, done.stderr
    assert "(did you mean 'warehouse'?)" in done.stdout
    assert '[jobs."warehouse.export"] in the configuration' in done.stdout
    done = jobhost(
        environment(tmp_path, path, config + 'concurrency_group = "warehouse"\n'), "validate"
    )
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "1 job, 0 problems")


def test_a_limit_no_job_uses_is_only_a_warning(tmp_path: Path) -> None:
    path = plugin(tmp_path, _JOB)
    config = "[concurrency_limits]\nexports = 1\n"
    done = jobhost(environment(tmp_path, path, config), "validate", "--json")
    assert done.returncode == 0, done.stderr
    (warning,) = json.loads(done.stdout)["warnings"]
    assert warning["code"] == "unused-concurrency-limit"
    assert warning["message"].startswith("[concurrency_limits] exports = 1 names a group no job")


def test_a_limit_must_be_a_whole_number_from_one(tmp_path: Path) -> None:
    path = plugin(tmp_path, _JOB)
    for value in ("0", "true", "1.5", '"two"'):
        config = f"[concurrency_limits]\nwarehouse = {value}\n"
        done = jobhost(environment(tmp_path, path, config), "validate")
        assert done.returncode == 3, value
        assert "concurrency_limits" in done.stderr, done.stderr


def _full_group(tmp_path: Path) -> tuple[Path, str]:
    """A store where one host holds the group's only slot (its run's lease is live)."""
    store = f"sqlite:///{tmp_path}/store.db"
    config = tmp_path / "jobhost.toml"
    config.write_text(
        f'database_url = "{store}"\nplugins = ["{SAMPLE_PLUGIN}"]\n'
        "[concurrency_limits]\nwarehouse = 1\n"
        f'[modules.sample]\nlog = "{tmp_path / "runs.log"}"\n'
        '[[modules.sample.jobs]]\nname = "sample.busy"\ninterval = "1h"\n'
        'concurrency_group = "warehouse"\n'
        '[[modules.sample.jobs]]\nname = "sample.export"\ncron = "0 3 1 1 *"\n'
        'concurrency_group = "warehouse"\n'
    )
    settings = load_settings(config)
    engine = create_store_engine(store)
    upgrade(engine)
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    catalog = sample_catalog(settings)
    ticker = Ticker(
        Store(engine),
        catalog.jobs,
        host_id="elsewhere",
        lease_duration=timedelta(minutes=5),
        telemetry=Telemetry(TracerProvider(), MeterProvider()),
        concurrency_limits=settings.concurrency_limits,
    )
    now = datetime.now(UTC)
    ticker.sync(now - timedelta(hours=1, seconds=1))
    (claim,) = ticker.tick(now, 4).claims
    assert claim[0].job_name == "sample.busy"
    engine.dispose()
    return config, store


def _env(config: Path) -> dict[str, Any]:
    return {"JOBHOST_CONFIG": str(config)}


def test_trigger_on_a_full_group_queues_and_says_so(tmp_path: Path) -> None:
    config, _store = _full_group(tmp_path)
    done = run_jobhost("trigger", "sample.export", "--json", env=_env(config))
    assert done.returncode == 0, done.stderr
    assert "group warehouse is full (1 of 1 busy): the run is queued" in done.stderr
    assert "queued: waiting for a free slot of group warehouse" in done.stderr
    assert json.loads(done.stdout)["outcome"] == "queued"
    report = run_jobhost("report", "--json", env=_env(config))
    data = json.loads(report.stdout)
    assert data["groups"] == [
        {
            "group": "warehouse",
            "limit": 1,
            "running": 1,
            "waiting": 1,
            "waiting_jobs": ["sample.export"],
        }
    ]
    (export,) = [j for j in data["jobs"] if j["name"] == "sample.export"]
    assert export["status"] == "waiting"
    assert export["waiting_for"] == "waiting for group warehouse, 1 of 1 busy"
    text = run_jobhost("report", env=_env(config)).stdout
    assert "group warehouse: limit 1, running 1, waiting 1 (full)" in text
    assert "waiting for group warehouse, 1 of 1 busy" in text


def test_trigger_now_runs_beside_the_limit_and_the_record_says_so(tmp_path: Path) -> None:
    config, _store = _full_group(tmp_path)
    done = run_jobhost(
        "trigger", "sample.export", "--now", "--reason", "month end", "--json", env=_env(config)
    )
    assert done.returncode == 0, done.stderr
    assert "--now starts the run beside the limit" in done.stderr
    assert json.loads(done.stdout)["outcome"] == "succeeded"
    history = json.loads(run_jobhost("history", "sample.export", "--json", env=_env(config)).stdout)
    reasons = [run["reason"] for run in history["runs"]]
    assert reasons == [
        "month end; --now: started beside the limit of group warehouse (1 of 1 busy)"
    ]


def test_the_dashboard_shows_the_groups_and_a_waiting_job(tmp_path: Path) -> None:
    config, store = _full_group(tmp_path)
    assert run_jobhost("trigger", "sample.export", env=_env(config)).returncode == 0
    settings = load_settings(config)
    engine = create_store_engine(store)
    console = Console(settings, sample_catalog(settings), Store(engine), allow_actions=False)
    app = create_app(
        store_endpoints(settings, console.catalog, Store(engine)), pages=console.routes()
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        client = Client(f"http://127.0.0.1:{server.address[1]}")
        status, _headers, page = client.get("/")
        job = client.get("/jobs/sample.export")[2]
    finally:
        server.stop()
        engine.dispose()
    assert status == 200
    assert "group <b>warehouse</b>: limit 1, running 1, waiting 1" in page
    assert '<span class="flag">waiting for group warehouse, 1 of 1 busy</span>' in page
    assert 'data-job="sample.export" data-status="waiting"' in page
    assert "warehouse · waiting for group warehouse, 1 of 1 busy" in job
