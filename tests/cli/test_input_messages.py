"""Input that once passed, or got a vague or leaky answer, gets a clear one: a secret pasted as a
token digest is never echoed, a malformed JOBHOST_API_TOKENS is named, tokens that nothing
serves are warned about, NaN is not JSON, and a broken plugin fails ``jobhost kinds`` by name."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tests.support import run_jobhost

SECRET = "my-Plain-secret-value-9876"
BROKEN = "raise RuntimeError('boom at import')\n"
STRING_KINDS = (
    "from jobhost_contracts import hookimpl\n\n"
    "@hookimpl\n"
    "def jobhost_job_kinds(settings):\n"
    "    return 'not a list'\n"
)


def _config(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "jobhost.toml"
    path.write_text("\n".join([f'database_url = "sqlite:///{tmp_path}/s.db"', *lines]) + "\n")
    return str(path)


def _token(sha256: str) -> list[str]:
    return ["[[api_tokens]]", 'name = "deployer"', f'sha256 = "{sha256}"', 'scopes = ["read"]']


def test_a_secret_pasted_as_a_token_digest_is_never_echoed(tmp_path: Path) -> None:
    result = run_jobhost("--config", _config(tmp_path, *_token(SECRET)), "validate")
    assert result.returncode == 3
    assert "api_tokens.0.sha256" in result.stderr and "64 hex digits" in result.stderr
    assert SECRET not in result.stderr + result.stdout
    missing = f'[{{"name": "x", "sha256": "{SECRET}"}}]'
    result = run_jobhost("validate", env={"JOBHOST_API_TOKENS": missing})
    assert result.returncode == 3 and "scopes" in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_a_malformed_jobhost_api_tokens_is_named_with_the_fix() -> None:
    result = run_jobhost("validate", env={"JOBHOST_API_TOKENS": "deployer:abc"})
    assert result.returncode == 3
    assert "environment JOBHOST_API_TOKENS is not valid JSON" in result.stderr
    assert "JSON list" in result.stderr and '"sha256"' in result.stderr
    result = run_jobhost("validate", env={"JOBHOST_API_TOKENS": '{"name": "x"}'})
    assert result.returncode == 3
    assert "JOBHOST_API_TOKENS must be a JSON list" in result.stderr


def test_api_tokens_without_http_listen_are_warned_about(tmp_path: Path) -> None:
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    result = run_jobhost("--config", _config(tmp_path, *_token(digest)), "validate")
    assert result.returncode == 0, result.stderr
    assert "api_tokens is set but http_listen is not" in result.stderr
    listening = _config(tmp_path, 'http_listen = "127.0.0.1:8080"', *_token(digest))
    assert "http_listen is not" not in run_jobhost("--config", listening, "validate").stderr


def test_jobs_put_refuses_nan_in_its_file(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_jobhost("--config", config, "db", "upgrade").returncode == 0
    body = tmp_path / "job.json"
    body.write_text(
        '{"kind": "http", "interval": "10m", '
        '"settings": {"url": "http://127.0.0.1:9/x", "timeout": NaN}}'
    )
    result = run_jobhost(
        "--config", config, "jobs", "put", "hooks.x", "--file", str(body), "--reason", "x",
        env={"JOBHOST_LOAD_PLUGINS": "http"},
    )  # fmt: skip
    assert result.returncode == 2
    assert "NaN is not a JSON value" in result.stderr
    listed = run_jobhost("--config", config, "jobs", "list", env={"JOBHOST_LOAD_PLUGINS": "http"})
    assert "hooks.x" not in listed.stdout


def test_kinds_fails_by_name_when_a_plugin_is_broken(tmp_path: Path) -> None:
    broken = tmp_path / "broken_plugin.py"
    broken.write_text(BROKEN)
    result = run_jobhost("--config", _config(tmp_path, f'plugins = ["{broken}"]'), "kinds")
    assert result.returncode == 3
    assert "broken_plugin.py" in result.stderr and "boom at import" in result.stderr


def test_a_kinds_hook_returning_a_string_is_reported_as_that_hook(tmp_path: Path) -> None:
    plugin = tmp_path / "string_kinds.py"
    plugin.write_text(STRING_KINDS)
    config = _config(tmp_path, f'plugins = ["{plugin}"]')
    for command in ("validate", "kinds"):
        result = run_jobhost("--config", config, command)
        assert result.returncode == 3
        text = result.stdout + result.stderr
        assert "jobhost_job_kinds returned str 'not a list', not a list of JobKind" in text
        assert "jobhost_jobs returned" not in text


def test_the_jobhost_modules_error_gives_an_example_that_is_accepted() -> None:
    for broken in ['{"files": ', '["files"]']:
        refused = run_jobhost("validate", env={"JOBHOST_MODULES": broken})
        assert refused.returncode == 3
        example = re.search(r"e\.g\. JOBHOST_MODULES='([^']+)'", refused.stderr)
        assert example is not None, refused.stderr

        accepted = run_jobhost("validate", env={"JOBHOST_MODULES": example[1]})

        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        assert accepted.stdout.rstrip().endswith("0 problems")


def test_jobs_put_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_jobhost("--config", config, "db", "upgrade").returncode == 0
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'{"description": "caf\xe9"}')
    for path in (tmp_path / "missing.json", latin1):
        args = ("--config", config, "jobs", "put", "hooks.x", "--file", str(path), "--reason", "x")
        result = run_jobhost(*args)
        assert result.returncode == 2, result.stderr
        assert f"--file: {path} cannot be read" in result.stderr
        assert "unexpected error" not in result.stderr


def test_jobs_put_refuses_text_the_store_cannot_hold_as_the_api_does(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert run_jobhost("--config", config, "db", "upgrade").returncode == 0
    body = tmp_path / "job.json"
    body.write_text('{"kind": "http", "interval": "10m", "description": "a\\u0000b", '
                    '"settings": {"url": "http://127.0.0.1:9/x"}}')  # fmt: skip
    put = ("--config", config, "jobs", "put", "hooks.x", "--reason", "x")
    http = {"JOBHOST_LOAD_PLUGINS": "http"}
    result = run_jobhost(*put, "--file", str(body), env=http)
    assert result.returncode == 3, result.stderr
    assert "description: must not contain a NUL character" in result.stderr
    result = run_jobhost(*put, "--file", str(body), "--setting", 'body="\\ud800"', env=http)
    assert result.returncode == 3, result.stderr
    assert "settings.body: must not contain a lone surrogate" in result.stderr
    assert "hooks.x" not in run_jobhost("--config", config, "jobs", "list", env=http).stdout
