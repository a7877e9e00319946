"""A setting given in the environment replaces the file's whole: a table as much as a list, so
``JOBHOST_OPERATOR_TOKENS='{}'`` revokes every operator the file names."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from jobhost.config import load_settings

FILE = """
[operator_tokens]
alice = "alice-token-0123456789"
bob = "bob-token-0123456789ab"

[concurrency_limits]
warehouse = 2
mail = 1

[jobs."files.orphan-cleanup"]
enabled = false

[jobs."jobhost.run-retention"]
timezone = "Europe/Berlin"

[modules.files]
roots = ["/srv/uploads"]

[modules.jobhost]
keep_days = 14

[[api_tokens]]
name = "deployer"
sha256 = "{digest}"
scopes = ["read"]
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPERATOR_TOKENS", "CONCURRENCY_LIMITS", "JOBS", "MODULES", "API_TOKENS"):
        monkeypatch.delenv(f"JOBHOST_{name}", raising=False)
    path = tmp_path / "jobhost.toml"
    path.write_text(FILE.replace("{digest}", hashlib.sha256(b"x").hexdigest()))
    return path


def test_without_the_environment_the_files_tables_hold(config: Path) -> None:
    settings = load_settings(config)
    assert set(settings.operator_tokens) == {"alice", "bob"}
    assert settings.concurrency_limits == {"warehouse": 2, "mail": 1}
    assert set(settings.jobs) == {"files.orphan-cleanup", "jobhost.run-retention"}
    assert set(settings.modules) == {"files", "jobhost"}


def test_an_empty_table_in_the_environment_leaves_no_operator(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBHOST_OPERATOR_TOKENS", "{}")
    settings = load_settings(config)
    assert settings.operator_tokens == {}
    # The other tables are the file's still.
    assert settings.concurrency_limits == {"warehouse": 2, "mail": 1}


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        (
            "JOBHOST_OPERATOR_TOKENS",
            {"carol": "carol-token-0123456789"},
            "operator_tokens",
            {"carol": "carol-token-0123456789"},
        ),
        ("JOBHOST_CONCURRENCY_LIMITS", {"mail": 5}, "concurrency_limits", {"mail": 5}),
        (
            "JOBHOST_MODULES",
            {"jobhost": {"keep_days": 3}},
            "modules",
            {"jobhost": {"keep_days": 3}},
        ),
    ],
)
def test_a_table_in_the_environment_replaces_the_files_whole(
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: object,
    field: str,
    expected: object,
) -> None:
    monkeypatch.setenv(variable, json.dumps(value))
    assert getattr(load_settings(config), field) == expected


def test_the_jobs_table_and_a_list_are_replaced_too(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBHOST_JOBS", json.dumps({"files.orphan-cleanup": {"enabled": True}}))
    monkeypatch.setenv("JOBHOST_API_TOKENS", "[]")
    settings = load_settings(config)
    assert list(settings.jobs) == ["files.orphan-cleanup"]
    assert settings.jobs["files.orphan-cleanup"].enabled is True
    assert settings.api_tokens == []
