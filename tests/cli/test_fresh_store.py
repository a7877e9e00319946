"""Only ``run`` and ``db upgrade`` create a store; every other command refuses to make one.

A command run in the wrong directory, or with the configuration forgotten, must not work on a
new, empty store beside the real one (reporting success, outside the real ledger and state).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_jobhost

_RETENTION = {"JOBHOST_LOAD_PLUGINS": "jobhost"}


@pytest.mark.parametrize(
    "args",
    [
        ["trigger", "jobhost.run-retention"],
        ["report"],
        ["history", "jobhost.run-retention"],
        ["health"],
        ["pause", "jobhost.run-retention", "--reason", "maintenance"],
        ["resume", "jobhost.run-retention", "--reason", "done"],
        ["plan"],
        ["db", "current"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_without_configuration_a_command_refuses_to_create_the_default_store(
    tmp_path: Path, args: list[str]
) -> None:
    result = run_jobhost(*args, env=_RETENTION, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert f"no store at {tmp_path / 'jobhost.db'}" in result.stderr
    assert "--config PATH or JOBHOST_CONFIG=PATH" in result.stderr
    assert "JOBHOST_DATABASE_URL=URL" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == [], "nothing may be created"


def test_a_configured_store_file_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/typo.db"
    result = run_jobhost(
        "trigger",
        "jobhost.run-retention",
        env={**_RETENTION, "JOBHOST_DATABASE_URL": url},
        cwd=tmp_path,
    )
    assert result.returncode == 3
    assert f"no store at {tmp_path / 'typo.db'}" in result.stderr
    assert "names a file that does not exist; fix database_url" in result.stderr
    assert not (tmp_path / "typo.db").exists()


def test_a_named_file_that_sets_no_database_url_is_said_to_leave_the_default(
    tmp_path: Path,
) -> None:
    config = tmp_path / "jobhost.toml"
    config.write_text("[modules.jobhost]\nkeep_days = 14\n")
    result = run_jobhost("report", env={**_RETENTION, "JOBHOST_CONFIG": str(config)}, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert (
        f"no store at {tmp_path / 'jobhost.db'}: that is the default store, used because "
        "jobhost.toml sets no database_url (nor JOBHOST_DATABASE_URL)"
    ) in result.stderr
    assert list(tmp_path.iterdir()) == [config], "nothing may be created"


def test_db_upgrade_creates_the_store_and_then_the_other_commands_use_it(tmp_path: Path) -> None:
    created = run_jobhost("db", "upgrade", env=_RETENTION, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "jobhost.db").exists()
    ran = run_jobhost("trigger", "jobhost.run-retention", "--json", env=_RETENTION, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert '"outcome": "succeeded"' in ran.stdout


@pytest.mark.parametrize("command", [["db", "upgrade"], ["run"]])
def test_a_store_in_a_directory_that_does_not_exist_is_named_with_the_fix(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "var" / "lib"
    env = {**_RETENTION, "JOBHOST_DATABASE_URL": f"sqlite:///{missing}/jobhost.db"}
    result = run_jobhost(*command, env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"its directory {missing} does not exist; create it, or fix database_url" in (
        result.stderr
    )
    assert list(tmp_path.iterdir()) == []


def test_an_existing_store_not_yet_migrated_follows_auto_migrate(tmp_path: Path) -> None:
    (tmp_path / "other.db").touch()
    env = {**_RETENTION, "JOBHOST_DATABASE_URL": f"sqlite:///{tmp_path}/other.db"}
    refused = run_jobhost(
        "trigger", "jobhost.run-retention", env={**env, "JOBHOST_AUTO_MIGRATE": "false"}
    )
    assert refused.returncode == 1
    assert "run `jobhost db upgrade`" in refused.stderr
    migrated = run_jobhost("trigger", "jobhost.run-retention", env=env)
    assert migrated.returncode == 0, migrated.stderr
