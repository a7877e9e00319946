"""A backfill from the job page: previewed, confirmed, audited, and its progress shown."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from jobhost.records import ChangeSearch
from jobhost.store import reading
from jobhost.store.runtime import search_changes
from jobhost.store.schema import backfills, runs
from tests.cli.operator_support import Operator
from tests.web.console_support import TOKEN, Client, add_operator_token, serve_console


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[Client, Operator]]:
    operator = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}], console_actions=True)
    add_operator_token(operator)
    operator.sync()
    try:
        with serve_console(operator, allow_actions=True) as client:
            yield client, operator
    finally:
        operator.close()


def test_a_backfill_is_previewed_then_confirmed_and_shown(
    client: tuple[Client, Operator],
) -> None:
    web, operator = client
    assert web.post("/signin", f"token={TOKEN}")[0] == 200
    job = web.get("/jobs/sample.nightly")[2]
    assert 'id="backfill-form"' in job
    found = re.search(r'name="csrf" value="([^"]+)"', job)
    assert found is not None
    form = f"csrf={found[1]}&from=2026-11-20&to=2026-11-23&mode=missing&concurrency=2&reason=fix"
    status, _, page = web.post("/jobs/sample.nightly/backfill", form)
    assert status == 200 and 'id="backfill-confirm-form"' in page
    assert re.findall(r"<li>(2026-11-2\dT03:00:00Z)</li>", page) == [
        "2026-11-20T03:00:00Z",
        "2026-11-21T03:00:00Z",
        "2026-11-22T03:00:00Z",
    ]
    with reading(operator.engine) as connection:
        assert connection.execute(select(backfills)).all() == []  # a preview records nothing
    status, _, page = web.post("/jobs/sample.nightly/backfill", form + "&confirm=yes")
    assert status == 200 and "backfill recorded" in page
    assert 'id="backfills"' in page and "0 of 3 done" in page
    with reading(operator.engine) as connection:
        (row,) = connection.execute(select(backfills)).mappings().all()
        audit = [
            (c.action, c.actor)
            for c in search_changes(connection, ChangeSearch(), 100, oldest_first=True)
        ]
    assert (row["actor"], row["reason"], row["concurrency"]) == ("bob", "fix", 2)
    assert audit == [("backfill", "bob")]  # in the one change log, like every action
    bad = form.replace("to=2026-11-23", "to=2999-01-01")
    status, _, page = web.post("/jobs/sample.nightly/backfill", bad)
    assert status == 400 and "reaches the future" in page


def test_a_running_backfill_is_cancelled_from_the_job_page_after_a_confirmation(
    client: tuple[Client, Operator],
) -> None:
    web, operator = client
    assert web.post("/signin", f"token={TOKEN}")[0] == 200
    found = re.search(r'name="csrf" value="([^"]+)"', web.get("/jobs/sample.nightly")[2])
    assert found is not None
    csrf = found[1]
    start = f"csrf={csrf}&from=2026-11-20&to=2026-11-23&mode=all&concurrency=1&reason=fix"
    page = web.post("/jobs/sample.nightly/backfill", start + "&confirm=yes")[2]
    with reading(operator.engine) as connection:
        (backfill_id,) = connection.execute(select(backfills.c.id)).scalars().all()
    # The progress list refreshes live; the cancel form, a reason being typed, stays outside it.
    assert re.search(r'<ul class="audit" id="backfills" data-live>', page)
    live_list = page.split('id="backfills" data-live>', 1)[1].split("</ul>", 1)[0]
    assert "<form" not in live_list
    assert f'id="cancel-backfill-{backfill_id}"' in page
    assert f'<label for="cancel-backfill-reason-{backfill_id}">' in page
    cancel = f"csrf={csrf}&backfill={backfill_id}&reason=wrong+range"
    assert (
        web.post("/jobs/sample.nightly/cancel-backfill", f"csrf={csrf}&backfill={backfill_id}")[0]
        == 400
    )  # no reason, no cancel
    status, _, page = web.post("/jobs/sample.nightly/cancel-backfill", cancel)
    assert status == 200 and 'id="cancel-backfill-confirm-form"' in page
    with reading(operator.engine) as connection:
        assert connection.execute(select(backfills.c.state)).scalar_one() == "running"
    status, _, page = web.post("/jobs/sample.nightly/cancel-backfill", cancel + "&confirm=yes")
    assert status == 200 and "backfill cancelled" in page
    assert f'id="cancel-backfill-{backfill_id}"' not in page  # nothing left to cancel
    assert '<span class="backfill-state">cancelled</span>' in page
    with reading(operator.engine) as connection:
        assert connection.execute(select(backfills.c.state)).scalar_one() == "cancelled"
        changes = [
            (c.action, c.actor, c.reason)
            for c in search_changes(connection, ChangeSearch(), 100, oldest_first=True)
        ]
    assert ("backfill-cancel", "bob", "wrong range") in changes
    unknown = f"csrf={csrf}&backfill={'0' * 32}&reason=x&confirm=yes"
    assert web.post("/jobs/sample.nightly/cancel-backfill", unknown)[0] == 404


def test_cancelling_a_backfill_needs_an_operator_signed_in(
    client: tuple[Client, Operator],
) -> None:
    web, _ = client
    status, _, page = web.post(
        "/jobs/sample.nightly/cancel-backfill", f"backfill={'0' * 32}&reason=x&confirm=yes"
    )
    assert status == 403 and "sign in with an operator token" in page


def test_a_finished_backfill_offers_no_cancel_form(client: tuple[Client, Operator]) -> None:
    web, operator = client
    assert web.post("/signin", f"token={TOKEN}")[0] == 200
    found = re.search(r'name="csrf" value="([^"]+)"', web.get("/jobs/sample.nightly")[2])
    assert found is not None
    start = f"csrf={found[1]}&from=2026-11-20&to=2026-11-22&mode=all&concurrency=1&reason=fix"
    page = web.post("/jobs/sample.nightly/backfill", start + "&confirm=yes")[2]
    with reading(operator.engine) as connection:
        (backfill_id,) = connection.execute(select(backfills.c.id)).scalars().all()
    # While it runs, its form goes from an open page at the refresh that shows it ended.
    assert re.search(
        f'id="cancel-backfill-{backfill_id}" class="cancel-backfill" data-live-gone', page
    )
    with operator.engine.begin() as connection:
        # Both occurrences ran and succeeded: their runs say so.
        connection.execute(
            update(runs)
            .where(runs.c.backfill_id == backfill_id)
            .values(outcome="succeeded", started_at=runs.c.queued_at, finished_at=runs.c.queued_at)
        )
    page = web.get("/jobs/sample.nightly")[2]
    assert "2 of 2 done" in page
    assert f'id="cancel-backfill-{backfill_id}"' not in page
    with operator.engine.begin() as connection:
        connection.execute(update(backfills).values(state="done"))
    assert f'id="cancel-backfill-{backfill_id}"' not in web.get("/jobs/sample.nightly")[2]
