"""Property-based: schemathesis generates requests from ``/api/v1/openapi.json`` (valid and
invalid ones) and checks that no answer is a server error and every answer fits the document:
its status, content type, headers and body schema.

Every operation gets :data:`EXAMPLES` requests per mode and store: fewer lose reach (at 4, the
negative mode no longer reaches the failures listing's answer, nor the 400s and 401s of several
operations). The requests share one kept-alive client, as a real client would, rather than a new
connection each.

Where the server reads a value by hand (the failures listing's ``since`` and ``cursor``, the
reasons), the document and the server must agree both ways: a value the document allows is not
refused, one it does not (a reason past its maxLength, a ``since`` of another shape) is refused
rather than cut or guessed."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.generation import GenerationMode

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.operations.changes import REASON_LIMIT
from jobhost.operations.failures import CURSOR_PATTERN, decode_cursor, encode_cursor
from jobhost.records import FailureKey
from jobhost.runtime.service import JobService
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.models import SINCE_PATTERN
from jobhost.web.api.routes import api_routes
from tests.conftest import BACKENDS, postgres_schema

SECRET = "schema-secret-0123456789abcdef"
EXAMPLES = 12
"""Generated requests per operation and mode: bounded, so the run takes seconds."""
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture(scope="module", params=BACKENDS)
def api_base(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        directory: Path = tmp_path_factory.mktemp("schema")
        yield from _serve(f"sqlite:///{directory}/store.db")
        return
    with postgres_schema() as url:
        yield from _serve(url)


def _serve(store_url: str) -> Iterator[str]:
    config = Settings(
        database_url=store_url,
        api_tokens=[
            {
                "name": "fuzzer",
                "sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
                "scopes": ["read", "write", "trigger"],
            }
        ],
    )
    engine = create_store_engine(config.database_url)
    upgrade(engine)
    catalog = build_catalog(config, environ={"JOBHOST_LOAD_PLUGINS": "http"})
    # One runtime job, so the operations on an existing job are reached too.
    JobService(config, catalog, Store(engine)).put(
        "hooks.existing",
        {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}},
        actor="setup",
        if_match=None,
        reason="a job to act on",
    )
    app = create_app(
        store_endpoints(config, catalog, Store(engine)),
        routes=api_routes(config, catalog, Store(engine), trigger_wait=0),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}"
    finally:
        server.stop()
        engine.dispose()


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    """One client for every generated request: kept-alive connections, not one per request."""
    with requests.Session() as made:
        yield made


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_every_answer_fits_the_document(
    api_base: str, session: requests.Session, mode: GenerationMode
) -> None:
    """Each operation gets a bounded number of generated requests in ``mode``; every failure
    of every operation is collected and reported together."""
    schema = schemathesis.openapi.from_url(f"{api_base}/api/v1/openapi.json")
    failures: list[str] = []
    labels: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def exercise(case: schemathesis.Case) -> None:
            case.call_and_validate(
                base_url=f"{api_base}/api/v1",
                session=session,
                headers={"Authorization": f"Bearer {SECRET}"},
                checks=CHECKS,
            )

        try:
            exercise()
        except Exception as error:  # every operation's failure, not only the first one
            failures.append(f"{operation.label}: {error}")
    # Every operation but the document's own (schemathesis leaves out the URL it loaded).
    assert len(labels) == 23, labels
    assert not failures, "\n\n".join(failures)


AGREEMENT = {
    ("GET", "/failures"),
    ("POST", "/failures"),
    ("POST", "/jobs/{name}/pause"),
    ("POST", "/jobs/{name}/resume"),
    ("POST", "/jobs/{name}/trigger"),
    ("DELETE", "/jobs/{name}"),
    ("DELETE", "/backfills/{backfill_id}"),
}
"""The operations whose parameters or reason the server reads by hand."""


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_what_the_document_allows_is_accepted_and_the_rest_refused(
    api_base: str, session: requests.Session, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{api_base}/api/v1/openapi.json")
    failures: list[str] = []
    seen = set()
    for result in schema.get_all_operations():
        operation = result.ok()
        key = (operation.method.upper(), operation.path)
        if key not in AGREEMENT:
            continue
        seen.add(key)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES * 2,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def exercise(case: schemathesis.Case) -> None:
            # In the case itself, so that a case whose only fault is an extra header or query
            # parameter (which servers ignore) is not taken for a fault of its own.
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {SECRET}"}
            case.call_and_validate(
                base_url=f"{api_base}/api/v1",
                session=session,
                checks=[*CHECKS, checks.positive_data_acceptance, checks.negative_data_rejection],
            )

        try:
            exercise()
        except Exception as error:
            failures.append(f"{operation.label}: {error}")
    assert seen == AGREEMENT
    assert not failures, "\n\n".join(failures)


def test_the_document_lists_what_the_server_accepts_for_since_and_cursor(
    api_base: str, session: requests.Session
) -> None:
    document = session.get(f"{api_base}/api/v1/openapi.json").json()
    listed = document["paths"]["/failures"]["get"]["parameters"]
    patterns = {p["name"]: re.compile(p["schema"].get("pattern", "")) for p in listed}
    assert patterns["since"].pattern == f"^(?:{SINCE_PATTERN})?$"
    assert patterns["cursor"].pattern == f"^(?:{CURSOR_PATTERN})?$"
    cursor = encode_cursor(FailureKey(datetime(2026, 11, 28, 6, 0, 0, 123456, tzinfo=UTC), "r-1"))
    assert decode_cursor(cursor) == FailureKey(
        datetime(2026, 11, 28, 6, 0, 0, 123456, tzinfo=UTC), "r-1"
    )

    def status(**query: str) -> int:
        answer = session.get(
            f"{api_base}/api/v1/failures",
            params=query,
            headers={"Authorization": f"Bearer {SECRET}"},
        )
        return answer.status_code

    accepted = {
        "since": [
            "2h", "7d", "30m", "90s", "250ms", "9999w1d2h", "4h30m", "2026-11-28", "2024-02-29",
            "1000-01-01T00:00-23:59", "9899-12-31T23:59:59.999999+23:59", "2026-11-28T06:00Z",
        ],
        "cursor": ["start", cursor, "0~a", "999999999999999999~" + "x" * 64],
    }  # fmt: skip
    refused = {
        "since": [
            "0h", "1.5h", "2 h", "1w2d3h4m", "-2h", "2026-02-29", "2026-02-30", "2026-11-28T06:00",
            "2026-11-28 06:00Z", "0999-01-01", "9999-01-01", "soon", "2h\n",
        ],
        "cursor": ["Z2l2ZSBtZQ", "1~", "~r-1", "1~r 1", "1" * 19 + "~r", "start\n"],
    }  # fmt: skip
    for name, values in accepted.items():
        for value in values:
            assert patterns[name].fullmatch(value), (name, value)
            assert status(**{name: value}) == 200, (name, value)
    for name, values in refused.items():
        for value in values:
            assert not patterns[name].fullmatch(value), (name, value)
            assert status(**{name: value}) == 400, (name, value)


def test_a_reason_past_the_documented_length_is_refused_not_cut(
    api_base: str, session: requests.Session
) -> None:
    document = session.get(f"{api_base}/api/v1/openapi.json").json()
    limit = document["components"]["schemas"]["Reason"]["properties"]["reason"]["maxLength"]
    assert limit == REASON_LIMIT
    long = "x" * (limit + 1)
    job = "/jobs/hooks.existing"
    definition = {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}}
    asks = [
        ("POST", f"{job}/pause", {"reason": long}),
        ("POST", f"{job}/resume", {"reason": long}),
        ("POST", f"{job}/trigger", {"reason": long}),
        ("PUT", f"{job}/state/k", {"value": "v", "reason": long}),
        ("DELETE", job, {"reason": long}),
        ("PUT", job, {**definition, "reason": long}),
        ("POST", "/pause", {"modules": ["hooks"], "reason": long}),
        ("POST", "/failures", {"job": "hooks.existing", "reason": long}),
    ]
    for method, path, body in asks:
        answer = session.request(
            method,
            f"{api_base}/api/v1{path}",
            json=body,
            headers={"Authorization": f"Bearer {SECRET}"},
        )
        assert answer.status_code == 422, (method, path, answer.text)
        assert [e["field"] for e in answer.json()["errors"]] == ["reason"], (method, path)
    # The job is as it was: nothing was done with a shortened reason.
    shown = session.get(
        f"{api_base}/api/v1{job}", headers={"Authorization": f"Bearer {SECRET}"}
    ).json()
    assert shown["paused"] is False
    paused = session.post(
        f"{api_base}/api/v1{job}/pause",
        json={"reason": "y" * limit},
        headers={"Authorization": f"Bearer {SECRET}"},
    )
    assert paused.status_code == 200, paused.text
    resumed = session.post(
        f"{api_base}/api/v1{job}/resume",
        json={"reason": "z" * limit},
        headers={"Authorization": f"Bearer {SECRET}"},
    )
    assert resumed.status_code == 200, resumed.text
