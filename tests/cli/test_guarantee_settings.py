"""Settings that would break a guarantee are refused, naming the setting, its source and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobhost.config import Settings
from tests.support import run_jobhost


def _validate(tmp_path: Path, toml: str = "", **env: str) -> str:
    config = tmp_path / "jobhost.toml"
    config.write_text(toml)
    result = run_jobhost("--config", str(config), "validate", env=env, cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def test_a_lease_shorter_than_two_heartbeats_is_refused_saying_by_how_much(tmp_path: Path) -> None:
    stderr = _validate(tmp_path, 'lease_duration = "5s"\nheartbeat_interval = "5s"\n')
    assert "lease_duration (5s) must be at least 2x heartbeat_interval (5s)" in stderr
    assert "raise lease_duration to 10s or more, or lower heartbeat_interval" in stderr
    assert "lease_duration: in jobhost.toml; heartbeat_interval: in jobhost.toml" in stderr


def test_the_lease_rule_names_the_variable_a_value_came_from(tmp_path: Path) -> None:
    stderr = _validate(tmp_path, "", JOBHOST_HEARTBEAT_INTERVAL="45s")
    assert "at least 1m30s" in stderr
    assert "heartbeat_interval: environment JOBHOST_HEARTBEAT_INTERVAL" in stderr
    assert "lease_duration: default" in stderr


@pytest.mark.parametrize(
    "line,expected",
    [
        ('lease_duration = "0s"', "lease_duration (in jobhost.toml) = '0s': must be positive"),
        ('lease_duration = "-1s"', "lease_duration (in jobhost.toml) = '-1s': must be positive"),
        ('shutdown_grace = "-5s"', "shutdown_grace (in jobhost.toml) = '-5s': must be positive"),
        ("audit_sink_timeout = -3", "audit_sink_timeout (in jobhost.toml) = -3: must be positive"),
        ('poll_interval = "99999999999w"', "is too long a duration"),
        ('lease_duration = "400d"', "must be at most 365d"),
        ('overdue_grace = "-1m"', "overdue_grace (in jobhost.toml) = '-1m': must not be negative"),
        ('clock_offset = "2d"', "must be within one day"),
        ("worker_pool_size = true", "worker_pool_size (in jobhost.toml) = True: must be a whole"),
        ("http_concurrency = true", "http_concurrency (in jobhost.toml) = True: must be a whole"),
        ("api_body_limit = false", "api_body_limit (in jobhost.toml) = False: must be a whole"),
        ("backfill_limit = true", "backfill_limit (in jobhost.toml) = True: must be a whole"),
        ('host_id = "  "', "host_id (in jobhost.toml) = '  ': must be 1 to 200 characters"),
    ],
)
def test_values_that_break_a_guarantee_are_refused(
    tmp_path: Path, line: str, expected: str
) -> None:
    assert expected in _validate(tmp_path, line + "\n")


def test_a_negative_duration_from_the_environment_is_called_not_positive(tmp_path: Path) -> None:
    stderr = _validate(tmp_path, "", JOBHOST_LEASE_DURATION="-1s")
    assert "lease_duration (environment JOBHOST_LEASE_DURATION) = '-1s': must be positive" in stderr
    assert "not a duration" not in stderr


@pytest.mark.parametrize("variable", ["JOBHOST_JOBS", "JOBHOST_MODULES"])
def test_malformed_json_in_the_environment_names_the_variable(
    tmp_path: Path, variable: str
) -> None:
    stderr = _validate(tmp_path, "", **{variable: "{not json"})
    assert f"environment {variable} is not valid JSON" in stderr
    assert "write one JSON object" in stderr


def test_json_that_is_not_an_object_names_the_variable(tmp_path: Path) -> None:
    stderr = _validate(tmp_path, "", JOBHOST_JOBS="[1, 2]")
    assert "environment JOBHOST_JOBS must be a JSON object" in stderr


def test_the_repr_of_the_settings_hides_every_password() -> None:
    settings = Settings(
        database_url="postgresql://app:S3cretPW@db/app",
        modules={"files": {"references_url": "postgresql://ref:Hunter22@db/app"}},
    )
    for shown in (repr(settings), str(settings)):
        assert "S3cretPW" not in shown and "Hunter22" not in shown
        assert "postgresql://app:***@db/app" in shown
