"""``jobhost kinds`` and ``jobhost jobs ...`` as real processes on an SQLite store."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from pathlib import Path

import pytest

from jobhost.records import ChangeSearch
from jobhost.store import create_store_engine, reading, upgrade
from jobhost.store.runtime import search_changes
from tests.commands import jobhost_command
from tests.support import SAMPLE_PLUGIN


class Cli:
    """``python -m jobhost --config ... ARGS`` on one store, the http plugin only."""

    def __init__(self, url: str, config: Path, env: dict[str, str]) -> None:
        self.url = url
        self._config = config
        self._env = env

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return jobhost_command(["--config", str(self._config), *args], env=self._env)


@pytest.fixture
def jobhost(tmp_path: Path) -> Cli:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    config = tmp_path / "jobhost.toml"
    config.write_text(
        f'database_url = "{url}"\nplugins = ["{SAMPLE_PLUGIN}"]\n'
        f'[modules.sample]\nlog = "{tmp_path / "runs.log"}"\n'
        '[[modules.sample.jobs]]\nname = "sample.declared"\ncron = "0 3 * * *"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env["JOBHOST_LOAD_PLUGINS"] = "http"

    return Cli(url, config, env)


def test_kinds_lists_http_with_its_schema(jobhost: Cli) -> None:
    done = jobhost("kinds", "--json")
    assert done.returncode == 0, done.stderr
    kinds = {kind["name"]: kind for kind in json.loads(done.stdout)["kinds"]}
    assert set(kinds) == {"http"}  # only the http plugin is loaded here
    schema = kinds["http"]["settings_schema"]
    assert schema["required"] == ["url"] and schema["additionalProperties"] is False
    text = jobhost("kinds").stdout
    assert text.startswith("http (module http): Call an HTTP endpoint")
    assert "secret_headers" in text


def test_put_show_list_and_delete_from_the_command_line(jobhost: Cli, tmp_path: Path) -> None:
    definition = tmp_path / "job.json"
    definition.write_text(
        json.dumps({"kind": "http", "cron": "*/5 * * * *", "settings": {"url": "http://x/y"}})
    )
    unsaid = jobhost("jobs", "put", "hooks.ping", "--file", str(definition))
    assert unsaid.returncode == 2 and "--reason" in unsaid.stderr
    blank = jobhost("jobs", "put", "hooks.ping", "--file", str(definition), "--reason", " ")
    assert blank.returncode == 2 and "must say why" in blank.stderr
    made = jobhost("jobs", "put", "hooks.ping", "--file", str(definition), "--reason", "new")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith('hooks.ping: created (ETag "1-')
    # Flags alone change the stored definition; --interval replaces the cron expression.
    changed = jobhost(
        "jobs",
        "put",
        "hooks.ping",
        "--interval",
        "5m",
        "--setting",
        "expect_status=[200,204]",
        "--reason",
        "every 5 minutes",
        "--json",
    )
    assert changed.returncode == 0, changed.stderr
    stored = json.loads(changed.stdout)
    assert stored["definition"]["interval"] == "5m" and stored["definition"]["cron"] is None
    assert stored["definition"]["settings"] == {"url": "http://x/y", "expect_status": [200, 204]}
    assert stored["updated_by"] == getpass.getuser()

    # The store's jobs: the runtime job; the declared one no host has synced is not there yet.
    listed = json.loads(jobhost("jobs", "list", "--json").stdout)["jobs"]
    assert {job["name"]: job["source"] for job in listed} == {"hooks.ping": "api"}
    listed = json.loads(jobhost("jobs", "list", "--json", "--check-catalog").stdout)["jobs"]
    sources = {job["name"]: (job["source"], job["kind"]) for job in listed}
    assert sources == {"hooks.ping": ("api", "http"), "sample.declared": ("declaration", None)}
    shown = json.loads(jobhost("jobs", "show", "hooks.ping", "--json").stdout)
    assert shown["etag"] == stored["etag"] and shown["version"] == 2

    bad = jobhost(
        "jobs", "put", "hooks.ping", "--interval", "5x", "--setting", "bogus=1", "--reason", "x"
    )
    assert bad.returncode == 3
    assert "interval: '5x' is not a duration" in bad.stderr and "Traceback" not in bad.stderr
    stale = jobhost(
        "jobs", "put", "hooks.ping", "--interval", "6m", "--if-match", '"1-x"', "--reason", "x"
    )
    assert stale.returncode == 1 and "changed since you read it" in stale.stderr
    declared = jobhost("jobs", "delete", "sample.declared", "--reason", "x")
    assert declared.returncode == 1 and "declared by module sample" in declared.stderr

    # A report and validate see the runtime job, with source api.
    report = json.loads(jobhost("report", "--json").stdout)
    (job,) = [j for j in report["jobs"] if j["name"] == "hooks.ping"]
    assert job["effective_trigger"]["source"] == "api"
    assert jobhost("validate").returncode == 0

    assert jobhost("jobs", "delete", "hooks.ping").returncode == 2  # no --reason
    gone = jobhost("jobs", "delete", "hooks.ping", "--reason", "retired")
    assert gone.returncode == 0 and gone.stdout.strip() == "hooks.ping: removed"
    assert jobhost("jobs", "show", "hooks.ping").returncode == 2
    engine = create_store_engine(jobhost.url)
    with reading(engine) as connection:
        log = [
            (c.action, c.actor, c.reason)
            for c in search_changes(connection, ChangeSearch(), 100, oldest_first=True)
        ]
    engine.dispose()
    user = getpass.getuser()
    assert log == [
        ("create", user, "new"),
        ("change", user, "every 5 minutes"),
        ("delete", user, "retired"),
    ]
