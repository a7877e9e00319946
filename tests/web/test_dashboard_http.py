"""The dashboard over HTTP without a browser: paging, guards on actions, headers, read-only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, update

from jobhost.records import ChangeSearch
from jobhost.store import Store, reading
from jobhost.store.runtime import search_changes
from jobhost.store.schema import runs
from jobhost.web import WebServer
from jobhost.web.surfaces import store_application
from tests.cli.operator_support import Operator
from tests.web.console_support import (
    TOKEN,
    Client,
    add_operator_token,
    csrf_of,
    serve_console,
    sign_in,
)


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[Operator]:
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    jobs = [{"name": f"sample.job-{index:02d}", "interval": "1h"} for index in range(60)]
    made.configure(jobs, console_actions=True)
    add_operator_token(made)
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=True) as made:
        yield made


def _jobs(page: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', page)


def test_the_overview_pages_filters_and_sorts_on_the_server(client: Client) -> None:
    status, headers, first = client.get("/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert _jobs(first) == [f"sample.job-{index:02d}" for index in range(50)]
    assert "page 1 of 2" in first
    second = client.get("/?page=2")[2]
    assert _jobs(second) == [f"sample.job-{index:02d}" for index in range(50, 60)]
    assert _jobs(client.get("/?q=JOB-1")[2]) == [f"sample.job-{index}" for index in range(10, 20)]
    assert _jobs(client.get("/?state=failing")[2]) == []
    assert client.get("/static/console.css")[0] == 200
    # The one script is a file of the package (the policy allows no inline script).
    assert "script-src" not in headers["content-security-policy"]  # default-src 'self' rules
    status, served, script = client.get("/static/console.js")
    assert status == 200 and "javascript" in served["content-type"] and "data-live" in script
    assert re.findall(r"<script[^>]*>", first) == ['<script src="/static/console.js" defer>']
    assert 'data-live="5"' in first
    # Times are <time> elements holding the instant, so the script can show any zone.
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+Z"', first)
    assert client.get("/jobs/sample.nope")[0] == 404
    assert client.get("/runs/nope")[0] == 404


def _signed_in(client: Client) -> str:
    assert 'id="signed-in-as">bob<' in sign_in(client)
    return csrf_of(client, "/jobs/sample.job-01")


def test_actions_need_a_session_its_csrf_token_and_a_reason(
    client: Client, operator: Operator
) -> None:
    assert client.post("/signin", "token=wrong-token-123456")[0] == 403
    assert client.post("/jobs/sample.job-01/pause", "reason=x&csrf=x")[0] == 403
    csrf = _signed_in(client)
    status, _, page = client.post("/jobs/sample.job-01/pause", "reason=x&csrf=forged")
    assert status == 403 and "CSRF" in page
    status, _, page = client.post("/jobs/sample.job-01/pause", f"reason=+&csrf={csrf}")
    assert status == 400 and "say why" in page
    assert client.post("/jobs/sample.nope/pause", f"reason=x&csrf={csrf}")[0] == 404
    assert client.post("/jobs/sample.job-01/explode", f"reason=x&csrf={csrf}")[0] == 404

    status, _, page = client.post("/jobs/sample.job-01/pause", f"reason=INC-7+disk&csrf={csrf}")
    assert status == 200 and 'id="notice">paused<' in page
    row = operator.schedule("sample.job-01")
    assert row is not None and (row.paused, row.paused_by, row.paused_reason) == (
        True,
        "bob",
        "INC-7 disk",
    )
    assert "bob</b> pause: “INC-7 disk”" in page
    page = client.post("/jobs/sample.job-01/resume", f"reason=fixed&csrf={csrf}")[2]
    assert 'id="notice">resumed<' in page
    # A trigger asks once more before anything is queued, with the reason to check.
    status, _, page = client.post("/jobs/sample.job-01/trigger", f"reason=rerun&csrf={csrf}")
    assert status == 200 and 'id="confirm-form"' in page and 'value="rerun"' in page
    assert operator.requests() == []
    body = f"reason=rerun&csrf={csrf}&confirm=yes"
    status, _, page = client.post("/jobs/sample.job-01/trigger", body)
    # No host runs here: the request's page says it waits, and would lead to the run.
    assert status == 200 and 'id="request-waiting"' in page
    (request,) = operator.requests()
    assert client.get(f"/requests/{request.id}")[0] == 200
    # Once a host started it, the request's page leads to the run, which has the request's id.
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.id == request.id)
            .values(outcome="running", started_at=request.queued_at, host_id="h1")
        )
    status, _, page = client.get(f"/requests/{request.id}")
    assert status == 200 and f"Run <code>{request.id}</code>" in page
    assert client.get("/requests/not-a-request")[0] == 404
    refused = operator.add_run("sample.job-01", "skipped", source="manual")
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.id == refused)
            .values(priority=0, started_at=None, reason="job sample.job-01 is paused")
        )
    page = client.get(f"/requests/{refused}")[2]
    assert 'id="request-refused"' in page and "job sample.job-01 is paused" in page
    assert 'data-live="0"' in page  # nothing more to wait for
    assert (request.job_name, request.requested_by, request.reason) == (
        "sample.job-01",
        "bob",
        "rerun",
    )
    # The one change log has them, with the operator token's name as the actor; the
    # dashboard keeps no audit table of its own any more.
    assert not inspect(operator.engine).has_table("console_actions")
    with reading(operator.engine) as connection:
        logged = search_changes(
            connection, ChangeSearch(job="sample.job-01"), 100, oldest_first=True
        )
    assert [(c.actor, c.action, c.reason) for c in logged] == [
        ("bob", "pause", "INC-7 disk"),
        ("bob", "resume", "fixed"),
        ("bob", "trigger", "rerun"),
    ]
    client.post("/signout", "")
    assert 'id="trigger"' not in client.get("/jobs/sample.job-01")[2]


def test_jobhost_serve_is_read_only_whatever_the_settings(operator: Operator) -> None:
    settings, catalog = operator.settings, operator.catalog()
    server = WebServer(
        ("127.0.0.1", 0), store_application(settings, catalog, Store(operator.engine))
    )
    server.start()
    client = Client(f"http://127.0.0.1:{server.address[1]}")
    try:
        assert 'id="signin-link"' not in client.get("/")[2]
        status, _, page = client.post("/signin", f"token={TOKEN}")
        assert status == 403 and "jobhost serve" in page
        assert client.post("/jobs/sample.job-01/trigger", "reason=x&csrf=x")[0] == 403
        assert operator.requests() == []
    finally:
        server.stop()


def test_operator_tokens_must_be_long(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from jobhost.config import Settings

    with pytest.raises(ValidationError, match="too short: use at least 16"):
        Settings.model_validate({"operator_tokens": {"carol": "short"}})
