"""Commands on a store nothing has set up yet: migrations follow ``auto_migrate``."""

from __future__ import annotations

from pathlib import Path

from tests.support import run_jobhost


def test_trigger_on_a_store_nothing_set_up_yet_migrates_and_runs(tmp_path: Path) -> None:
    result = run_jobhost(
        "trigger",
        "jobhost.run-retention",
        "--json",
        env={"JOBHOST_LOAD_PLUGINS": "jobhost"},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert '"outcome": "succeeded"' in result.stdout
    refused = run_jobhost(
        "trigger",
        "jobhost.run-retention",
        env={
            "JOBHOST_LOAD_PLUGINS": "jobhost",
            "JOBHOST_DATABASE_URL": f"sqlite:///{tmp_path}/other.db",
            "JOBHOST_AUTO_MIGRATE": "false",
        },
        cwd=tmp_path,
    )
    assert refused.returncode == 1
    assert "run `jobhost db upgrade`" in refused.stderr
