"""Kind ``http``: the settings of a call, checked as a settings-file entry is, run for real."""

from __future__ import annotations

import pytest
from http_support import Server, make_context
from jobhost_contracts import KindSettingsError
from jobhost_http.plugin import jobhost_job_kinds
from returns.result import Failure, Success


def test_a_runtime_call_is_made_with_its_jobs_name_and_idempotency_key(server: Server) -> None:
    (kind,) = jobhost_job_kinds()
    assert kind.name == "http" and kind.module == "http"
    checked = kind.validate({"url": f"{server.base}/ok", "method": "POST", "body": "hi"})
    executor = kind.factory("hooks.ping", checked)
    result = executor.execute(make_context("hooks.ping"))
    assert isinstance(result, Success)
    (received,) = server.received
    assert (received.method, received.path, received.body) == ("POST", "/ok", b"hi")
    assert received.headers["Idempotency-Key"].startswith("hooks.ping:")
    failing = kind.factory("hooks.broken", kind.validate({"url": f"{server.base}/missing"}))
    outcome = failing.execute(make_context("hooks.broken"))
    assert isinstance(outcome, Failure) and "hooks.broken" in str(outcome.failure())


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        ({}, "url", "Field required"),
        ({"url": "ftp://x"}, "url", "http:// or https://"),
        ({"url": "http://x", "verb": "GET"}, "verb", "is not a known key"),
        ({"url": "http://x", "timeout": 30}, "timeout", "valid string"),
        ({"url": "http://x", "method": "FETCH"}, "method", "must be one of"),
        (
            {"url": "http://x", "secret_headers": {"Authorization": "a b"}},
            "secret_headers",
            "environment variable",
        ),
        ({"url": "http://x", "headers": {"Idempotency-Key": "k"}}, "headers", "Idempotency-Key"),
    ],
)
def test_refused_settings_name_the_key_and_the_fix(
    settings: dict[str, object], field: str, words: str
) -> None:
    (kind,) = jobhost_job_kinds()
    with pytest.raises(KindSettingsError) as caught:
        kind.validate(settings)
    assert caught.value.field == field
    assert words in caught.value.reason


def test_the_published_schema_is_the_models() -> None:
    (kind,) = jobhost_job_kinds()
    schema = kind.settings_schema
    assert schema["required"] == ["url"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "url",
        "method",
        "headers",
        "secret_headers",
        "body",
        "timeout",
        "expect_status",
    }
