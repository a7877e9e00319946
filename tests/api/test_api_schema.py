"""Property-based: schemathesis generates requests from ``/api/v1/openapi.json`` (valid and
invalid ones) and checks that no answer is a server error and every answer fits the document:
its status, content type, headers and body schema.

Every operation gets :data:`EXAMPLES` requests per mode and store: fewer lose reach (at 4, the
negative mode no longer reaches the failures listing's answer, nor the 400s and 401s of several
operations). The requests share one kept-alive client, as a real client would, rather than a new
connection each."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.generation import GenerationMode

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.runtime.service import JobService
from jobhost.store import create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api import api_routes
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
    JobService(config, catalog, engine).put(
        "hooks.existing",
        {"kind": "http", "interval": "1h", "settings": {"url": "http://127.0.0.1:9/"}},
        actor="setup",
        if_match=None,
    )
    app = create_app(
        store_endpoints(config, catalog, engine),
        routes=api_routes(config, catalog, engine, trigger_wait=0),
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
