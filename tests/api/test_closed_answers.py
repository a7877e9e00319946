"""Every answer is closed: the document lists each key an answer carries
(``additionalProperties: false``), and an answer with a key its model does not list is the
server's fault, answered 500 and logged, never sent."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.web.api.openapi import openapi_document
from jobhost.web.api.routes import _Api
from tests.api.api_support import call, served_api


def test_every_object_the_document_describes_lists_all_its_keys() -> None:
    schemas = openapi_document()["components"]["schemas"]
    objects = {name: s for name, s in schemas.items() if s.get("type") == "object"}
    assert {"Job", "Run", "LastRun", "Problem", "RunLog"} <= set(objects)
    assert {name for name, s in objects.items() if s.get("additionalProperties") is not False} == (
        set()
    )


def test_an_answer_with_a_key_its_model_does_not_list_is_a_logged_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def kinds(_self: _Api, _request: Request, _token: ApiToken) -> Response:
        return JSONResponse({"kinds": [], "secret_sql": "SELECT 1"})

    monkeypatch.setattr(_Api, "kinds", kinds)
    with (
        caplog.at_level(logging.ERROR, logger="jobhost.api"),
        served_api(f"sqlite:///{tmp_path}/store.db") as (base, _engine),
    ):
        answer = call(base, "GET", "/api/v1/kinds", token="reader")
        fine = call(base, "GET", "/api/v1/jobs", token="reader")
    assert answer.status == 500
    assert answer.content_type == "application/problem+json"
    assert answer.body["title"] == "Internal error"
    assert "SELECT" not in str(answer.body) and "secret_sql" not in str(answer.body)
    logged = [r.getMessage() for r in caplog.records if answer.body["id"] in r.getMessage()]
    assert len(logged) == 1
    assert "GET /kinds answered 200 outside its KindList model" in logged[0]
    assert "secret_sql" in logged[0] and "Extra inputs are not permitted" in logged[0]
    assert fine.status == 200
