"""Runtime jobs reach only what the operator granted, on both stores: secrets by the runtime
prefix or the allow-list, no credentials in plain fields, no response body quoted in a failure
(unless the kind's section allows it), and a stored job that names a refused variable fails its
run without reading it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.errors import ConfigError
from jobhost.runtime.service import ChangeRefused, JobService
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.store.runtime import insert_runtime_job
from tests.support import ManualClock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "modules" / "http"))
from http_support import Server, make_context, serve

NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def ping(url: str = "http://127.0.0.1:9/ping", **settings: Any) -> dict[str, Any]:
    return {"kind": "http", "interval": "10m", "settings": {"url": url, **settings}}


@pytest.fixture
def server() -> Iterator[Server]:
    with serve() as running:
        yield running


@pytest.fixture
def jobs_for(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., tuple[JobService, Engine]]]:
    monkeypatch.setenv("JOBHOST_LOAD_PLUGINS", "http")
    engines: list[Engine] = []

    def make(**values: Any) -> tuple[JobService, Engine]:
        settings = Settings(database_url=store_url, **values)
        engine = create_store_engine(settings.database_url)
        upgrade(engine)
        engines.append(engine)
        clock = ManualClock(NOW)
        return JobService(
            settings, build_catalog(settings), Store(engine, clock), trigger_wait=0
        ), engine

    yield make
    for engine in engines:
        engine.dispose()


def refusal(jobs: JobService, body: dict[str, Any]) -> ChangeRefused:
    with pytest.raises(ChangeRefused) as caught:
        jobs.put("hooks.ping", body, actor="deployer", if_match=None)
    assert caught.value.status == 422
    assert jobs.runtime_row("hooks.ping") is None
    return caught.value


@pytest.mark.parametrize("variable", ["HOME", "JOBHOST_DATABASE_URL", "JOBHOST_API_TOKENS"])
def test_a_runtime_job_may_not_name_a_variable_outside_the_runtime_prefix(
    jobs_for: Callable[..., tuple[JobService, Engine]], variable: str
) -> None:
    jobs, _ = jobs_for()
    error = refusal(jobs, ping(secret_headers={"Authorization": variable}))
    (problem,) = error.problems
    assert problem.field == "settings.secret_headers.Authorization"
    assert variable in problem.message
    assert "JOBHOST_RUNTIME_SECRET_" in problem.message
    assert "runtime_secret_env_prefix" in problem.message


def test_the_prefix_and_the_allow_list_grant_variables(
    jobs_for: Callable[..., tuple[JobService, Engine]],
) -> None:
    jobs, _ = jobs_for(runtime_secrets_allowed=["HOOK_TOKEN"])
    granted = {"Authorization": "JOBHOST_RUNTIME_SECRET_HOOK", "X-Token": "HOOK_TOKEN"}
    assert jobs.put("hooks.ping", ping(secret_headers=granted), actor="d", if_match=None).created
    # The bare prefix names no secret.
    error = refusal_named(jobs, {"X-Other": "JOBHOST_RUNTIME_SECRET_"})
    assert error.problems[0].field == "settings.secret_headers.X-Other"

    other, _ = jobs_for(runtime_secret_env_prefix="APP_SECRET_")
    assert other.put(
        "hooks.other", ping(secret_headers={"X-Key": "APP_SECRET_KEY"}), actor="d", if_match=None
    ).created
    with pytest.raises(ChangeRefused):
        other.put(
            "hooks.two",
            ping(secret_headers={"X-Key": "JOBHOST_RUNTIME_SECRET_KEY"}),
            actor="d",
            if_match=None,
        )


def refusal_named(jobs: JobService, headers: dict[str, str]) -> ChangeRefused:
    with pytest.raises(ChangeRefused) as caught:
        jobs.put("hooks.refused", ping(secret_headers=headers), actor="d", if_match=None)
    return caught.value


def test_a_stored_job_naming_a_refused_variable_fails_its_run_without_reading_it(
    jobs_for: Callable[..., tuple[JobService, Engine]],
    server: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs, engine = jobs_for()
    monkeypatch.setenv("JOBHOST_DATABASE_URL", "postgresql+psycopg://u:hunter2@db/x")
    # Written before the rule existed: straight into the store.
    body = ping(f"{server.base}/ok", secret_headers={"Authorization": "JOBHOST_DATABASE_URL"})
    with engine.begin() as connection:
        insert_runtime_job(
            connection,
            "hooks.old",
            {**body, "settings": body["settings"]},
            actor="early",
            now=NOW,
        )
    spec = jobs.current("hooks.old").jobs["hooks.old"]

    result = spec.executor.execute(make_context("hooks.old"))

    assert isinstance(result, Failure)
    text = str(result.failure())
    assert "JOBHOST_DATABASE_URL" in text and "not available to runtime jobs" in text
    assert "hunter2" not in text
    assert server.received == []  # nothing was sent


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"url": "https://user:pw@example.com/hook"}, "settings.url"),
        ({"headers": {"Authorization": "Bearer abc"}}, "settings.headers.Authorization"),
        ({"headers": {"proxy-authorization": "Basic x"}}, "settings.headers.proxy-authorization"),
        ({"headers": {"Cookie": "session=1"}}, "settings.headers.Cookie"),
        ({"headers": {"X-API-Key": "k"}}, "settings.headers.X-API-Key"),
        ({"headers": {"X_Api_Key": "k"}}, "settings.headers.X_Api_Key"),
        ({"headers": {"api-key": "k"}}, "settings.headers.api-key"),
        ({"headers": {"X-Auth-Token": "k"}}, "settings.headers.X-Auth-Token"),
        ({"headers": {"PRIVATE_TOKEN": "k"}}, "settings.headers.PRIVATE_TOKEN"),
        ({"url": "https://example.com/hook?x=1&api_key=Bearer abc"}, "settings.url"),
        ({"url": "https://example.com/hook?ApiKey=Bearer abc"}, "settings.url"),
        ({"url": "https://example.com/hook?access_token=Bearer abc"}, "settings.url"),
        ({"url": "https://example.com/hook?password=Bearer abc"}, "settings.url"),
        ({"body": '{"user": "u", "password": "Bearer abc"}'}, "settings.body"),
        ({"body": '{"auth": [{"Api-Key": "Bearer abc"}]}'}, "settings.body"),
        ({"body": '{"client": {"secret": "Bearer abc"}}'}, "settings.body"),
        ({"body": '{"passwd": "Bearer abc"}'}, "settings.body"),
    ],
)
def test_credentials_in_plain_fields_are_refused_pointing_at_secret_headers(
    jobs_for: Callable[..., tuple[JobService, Engine]], settings: dict[str, Any], field: str
) -> None:
    jobs, _ = jobs_for()
    body = ping(**{"url": "https://example.com/hook", **settings})
    error = refusal(jobs, body)
    assert [p.field for p in error.problems] == [field]
    assert "secret_headers" in error.problems[0].message
    assert "pw" not in error.detail and "Bearer abc" not in error.detail


@pytest.mark.parametrize(
    "settings",
    [
        {"headers": {"Accept": "application/json", "X-Request-Source": "jobhost"}},
        {"url": "https://example.com/hook?page=2&tokenizer=words"},
        {"body": '{"user": "u", "token_count": 3, "note": "password reset"}'},
        {"body": "password=plain-text-is-not-json"},
    ],
)
def test_plain_fields_that_are_not_credentials_are_accepted(
    jobs_for: Callable[..., tuple[JobService, Engine]], settings: dict[str, Any]
) -> None:
    jobs, _ = jobs_for()
    body = ping(**{"url": "https://example.com/hook", **settings})
    jobs.put("hooks.plain", body, actor="d", if_match=None)
    assert "hooks.plain" in jobs.current("hooks.plain").jobs


@pytest.mark.parametrize(("allowed", "quoted"), [(False, False), (True, True)])
def test_a_runtime_jobs_failure_gives_the_status_and_length_not_the_body(
    jobs_for: Callable[..., tuple[JobService, Engine]],
    server: Server,
    allowed: bool,
    quoted: bool,
) -> None:
    modules = {"http": {"runtime_response_body": True}} if allowed else {}
    jobs, _ = jobs_for(**({"modules": modules} if modules else {}))
    jobs.put("hooks.fail", ping(f"{server.base}/fail"), actor="d", if_match=None)
    spec = jobs.current("hooks.fail").jobs["hooks.fail"]
    context = make_context("hooks.fail")
    context = type(context)(**{**context.__dict__, "config": spec.config})

    result = spec.executor.execute(context)

    assert isinstance(result, Failure)
    text = str(result.failure())
    assert "answered 500" in text
    assert ("boom!" in text) is quoted
    if not quoted:
        assert "bytes (body not shown)" in text


def test_runtime_secret_variables_are_never_read_as_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from jobhost.config import load_settings

    monkeypatch.setenv("JOBHOST_RUNTIME_SECRET_HOOK", "s3cret")
    monkeypatch.setenv("JOBHOST_RUNTIME_SECRET_ENV_PREFIX", "JOBHOST_")
    settings = load_settings(None)
    assert settings.runtime_secret_env_prefix == "JOBHOST_RUNTIME_SECRET_"

    config = tmp_path / "jobhost.toml"
    config.write_text('runtime_secret_env_prefix = "JOBHOST_D"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "JOBHOST_DATABASE_URL" in str(caught.value)
    config.write_text('runtime_secrets_allowed = ["JOBHOST_DATABASE_URL"]\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "never read the host's settings" in str(caught.value)
