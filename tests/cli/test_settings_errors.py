"""Bad settings stop the process with a message naming the field; passwords never show."""

from __future__ import annotations

from pathlib import Path

from tests.support import run_jobhost


def test_every_bad_field_is_named_with_its_value_and_what_is_allowed(tmp_path: Path) -> None:
    config = tmp_path / "jobhost.toml"
    config.write_text(
        'worker_pool_size = 0\npoll_interval = "soon"\nlease_duraton = "1m"\n'
        '[jobs."files.orphan-cleanup"]\nintervl = "5m"\n'
    )
    result = run_jobhost("--config", str(config), "validate")
    assert result.returncode == 3
    assert "worker_pool_size (in jobhost.toml) = 0" in result.stderr
    assert "poll_interval (in jobhost.toml) = 'soon'" in result.stderr
    assert "'90s', '15m', '24h', '7d'" in result.stderr
    assert "lease_duraton (in jobhost.toml): is not a known setting" in result.stderr
    assert 'jobs."files.orphan-cleanup".intervl (in jobhost.toml): is not a known' in result.stderr
    # The hint is a key of the [jobs."NAME"] table, not a top-level setting.
    assert "intervl (in jobhost.toml): is not a known setting (did you mean 'interval'?)" in (
        result.stderr
    )
    assert "JOBHOST_" not in result.stderr, "no value here came from the environment"


def test_an_environment_variable_wins_and_is_named(tmp_path: Path) -> None:
    result = run_jobhost("validate", env={"JOBHOST_SHUTDOWN_GRACE": "0s"}, cwd=tmp_path)
    assert result.returncode == 3
    assert "shutdown_grace (environment JOBHOST_SHUTDOWN_GRACE)" in result.stderr
    assert "must be positive" in result.stderr


def test_a_named_config_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    result = run_jobhost("--config", str(tmp_path / "nope.toml"), "validate")
    assert result.returncode == 3
    assert "nope.toml does not exist" in result.stderr


def test_a_jobhost_toml_beside_a_command_that_names_none_is_said_to_be_unread(
    tmp_path: Path,
) -> None:
    (tmp_path / "jobhost.toml").write_text("[modules.jobhost]\nkeep_days = 14\n")
    unnamed = run_jobhost("validate", env={"JOBHOST_LOAD_PLUGINS": "jobhost"}, cwd=tmp_path)
    assert unnamed.returncode == 0, unnamed.stderr
    assert (
        "warning: jobhost.toml in the working directory is not read: a settings file is read "
        "only when named; add --config jobhost.toml (or set JOBHOST_CONFIG=jobhost.toml)"
    ) in unnamed.stderr
    named = run_jobhost(
        "--config",
        "jobhost.toml",
        "validate",
        env={"JOBHOST_LOAD_PLUGINS": "jobhost"},
        cwd=tmp_path,
    )
    assert named.returncode == 0, named.stderr
    assert "is not read" not in named.stderr


def test_a_bad_database_url_does_not_print_its_password(tmp_path: Path) -> None:
    result = run_jobhost(
        "validate", env={"JOBHOST_DATABASE_URL": "mysql://ops:hunter2@db/app"}, cwd=tmp_path
    )
    assert result.returncode == 3
    assert "database_url" in result.stderr and "SQLite or PostgreSQL" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_an_unreachable_store_is_reported_without_its_password(tmp_path: Path) -> None:
    url = "postgresql+psycopg://ops:hunter2@127.0.0.1:1/app"
    result = run_jobhost("db", "current", env={"JOBHOST_DATABASE_URL": url}, cwd=tmp_path)
    assert result.returncode == 1
    assert "cannot reach the store at postgresql+psycopg://ops:***@127.0.0.1:1/app" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    run = run_jobhost("run", env={"JOBHOST_DATABASE_URL": url}, cwd=tmp_path)
    assert run.returncode == 1
    assert "hunter2" not in run.stdout + run.stderr
