"""Retry, cancel and module pause/resume from the dashboard, over HTTP: the guards (session,
CSRF, reason, confirmation), the refusals, and one change log with the operator's name."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.records import ChangeSearch
from jobhost.store import reading
from jobhost.store.runtime import search_changes
from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, add_operator_token, csrf_of, serve_console, sign_in

JOBS = [
    {"name": "sample.flaky", "cron": "0 3 * * *", "behaviour": "fail-once"},
    {"name": "sample.slow", "cron": "0 3 * * *"},
]
OCCURRENCE = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[Operator]:
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    made.configure(JOBS, console_actions=True)
    add_operator_token(made)
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=True) as made:
        yield made


def _csrf(client: Client, path: str) -> str:
    sign_in(client)
    return csrf_of(client, path)


def test_retry_from_the_run_page_leads_to_the_new_attempt(
    client: Client, operator: Operator
) -> None:
    failed = operator.add_run("sample.flaky", "failed", occurrence=OCCURRENCE, error="boom")
    page = client.get(f"/runs/{failed}")[2]
    assert 'id="retry"' not in page and "to retry this run" in page  # not signed in
    csrf = _csrf(client, f"/runs/{failed}")
    page = client.get(f"/runs/{failed}")[2]
    assert '<label for="retry-reason">Why run this occurrence again (attempt 2)</label>' in page
    status, _, page = client.post(f"/runs/{failed}/retry", f"reason=fixed&csrf={csrf}")
    assert status == 400 and "tick the confirmation box" in page
    status, _, page = client.post(f"/runs/{failed}/retry", f"reason=+&confirm=yes&csrf={csrf}")
    assert status == 400 and "say why" in page
    status, _, page = client.post(f"/runs/{failed}/retry", "reason=x&confirm=yes&csrf=forged")
    assert status == 403
    status, _, page = client.post(
        f"/runs/{failed}/retry", f"reason=vendor+fixed&confirm=yes&csrf={csrf}"
    )
    assert status == 200 and 'id="notice">retry queued' in page
    _, retry = operator.runs("sample.flaky")
    assert f"Run <code>{retry.id}</code>" in page  # redirected to the new attempt
    assert (retry.attempt, retry.occurrence, retry.requested_by) == (2, OCCURRENCE, "bob")
    # The same run again: refused, naming the pending attempt.
    status, _, page = client.post(f"/runs/{failed}/retry", f"reason=again&confirm=yes&csrf={csrf}")
    assert status == 409 and f"(run {retry.id}) is pending" in page
    assert client.post("/runs/nope/retry", f"reason=x&confirm=yes&csrf={csrf}")[0] == 404
    assert client.post(f"/runs/{failed}/explode", f"reason=x&confirm=yes&csrf={csrf}")[0] == 404
    with reading(operator.engine) as connection:
        logged = search_changes(
            connection, ChangeSearch(job="sample.flaky"), 100, oldest_first=True
        )
    assert [(c.actor, c.action, c.reason) for c in logged] == [("bob", "retry", "vendor fixed")]


def test_cancel_has_a_page_of_its_own_and_records_who_asked(
    client: Client, operator: Operator
) -> None:
    running = operator.add_run(
        "sample.slow", "running", host="live-1", lease_expires_at=now() + timedelta(hours=1)
    )
    csrf = _csrf(client, f"/runs/{running}/cancel")
    run_page = client.get(f"/runs/{running}")[2]
    assert f'href="/runs/{running}/cancel" id="cancel-link"' in run_page
    form = client.get(f"/runs/{running}/cancel")[2]
    assert '<label for="cancel-reason">Why cancel this run</label>' in form
    status, _, page = client.post(
        f"/runs/{running}/cancel", f"reason=stuck+on+vendor&confirm=yes&csrf={csrf}"
    )
    assert status == 200 and 'id="notice">cancel asked' in page
    assert 'id="run-cancel">by bob at' in page and "stuck on vendor" in page
    assert 'id="cancel-link"' not in page  # asked once: no second button
    (run,) = operator.runs("sample.slow")
    assert (run.outcome, run.cancel_requested_by, run.cancel_reason) == (
        "running",
        "bob",
        "stuck on vendor",
    )
    ended = operator.add_run("sample.slow", "succeeded")
    status, _, page = client.post(f"/runs/{ended}/cancel", f"reason=x&confirm=yes&csrf={csrf}")
    assert status == 409 and "already ended succeeded" in page
    with reading(operator.engine) as connection:
        logged = search_changes(connection, ChangeSearch(job="sample.slow"), 100, oldest_first=True)
    assert [(c.actor, c.action, c.reason) for c in logged] == [("bob", "cancel", "stuck on vendor")]


def test_a_module_is_paused_and_resumed_from_the_overview(
    client: Client, operator: Operator
) -> None:
    assert 'id="bulk-pause"' not in client.get("/?module=sample")[2]  # not signed in
    csrf = _csrf(client, "/?module=sample")
    assert 'id="bulk-pause"' not in client.get("/")[2]  # no module chosen
    page = client.get("/?module=sample")[2]
    assert '<label for="bulk-pause-reason">Why pause every job of module sample</label>' in page
    status, _, page = client.post(
        "/modules/sample/pause", f"reason=vendor+outage&confirm=yes&csrf={csrf}"
    )
    assert status == 200 and 'id="bulk-notice">module paused' in page
    for job in ("sample.flaky", "sample.slow"):
        row = operator.schedule(job)
        assert row is not None and (row.paused, row.paused_by, row.paused_reason) == (
            True,
            "bob",
            "vendor outage",
        )
    assert client.post("/modules/nope/pause", f"reason=x&confirm=yes&csrf={csrf}")[0] == 404
    status, _, page = client.post("/modules/sample/resume", f"reason=back&confirm=yes&csrf={csrf}")
    assert status == 200 and 'id="bulk-notice">module resumed' in page
    with reading(operator.engine) as connection:
        logged = search_changes(connection, ChangeSearch(), 100, oldest_first=True)
    assert [(c.job_name, c.action, c.actor) for c in logged] == [
        ("sample.flaky", "pause", "bob"),
        ("sample.slow", "pause", "bob"),
        ("sample.flaky", "resume", "bob"),
        ("sample.slow", "resume", "bob"),
    ]
