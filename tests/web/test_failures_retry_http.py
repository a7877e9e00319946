"""The Failures page over HTTP, on both stores: open failures by default (resolved ones with
``all=true``, saying who resolved them), repeats grouped with their count, and "retry the N
shown" confirmed on a page that lists them, then one retry (and change-log entry) per run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from jobhost.records import ChangeSearch
from jobhost.store import reading
from jobhost.store.runtime import search_changes
from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, add_operator_token, csrf_of, serve_console, sign_in

JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.ping", "interval": "1m"},
]


def _night(back: int) -> datetime:
    return now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=back)


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(JOBS, console_actions=True)
    add_operator_token(made)
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=True) as made:
        yield made


def test_open_failures_grouped_and_the_shown_ones_retried_once_each(
    client: Client, operator: Operator
) -> None:
    nights = {
        back: operator.add_run(
            "sample.nightly", "failed", occurrence=_night(back), started=_night(back), error="503"
        )
        for back in (3, 2)
    }
    operator.add_run(
        "sample.nightly",
        "succeeded",
        occurrence=_night(3),
        attempt=2,
        source="retry",
        started=now() - timedelta(minutes=3),
        host="replica-2",
    )
    t = now() - timedelta(hours=1)
    pings = [
        operator.add_run(
            "sample.ping",
            "failed",
            occurrence=t + timedelta(minutes=m),
            started=t + timedelta(minutes=m),
            error="connection refused",
        )
        for m in range(30)
    ]
    page = client.get("/failures")[2]
    assert f'data-run="{nights[2]}"' in page and f'data-run="{nights[3]}"' not in page
    assert 'data-count="30"' in page and "&times; 30" in page
    everything = client.get("/failures?all=true")[2]
    assert f'data-run="{nights[3]}"' in everything and "retried</a> by replica-2" in everything
    assert 'id="retry-shown"' not in page  # not signed in

    sign_in(client)
    csrf = csrf_of(client, "/failures")
    page = client.get("/failures")[2]
    assert "Retry the 31 shown" in page
    runs = ",".join([nights[2], *pings])
    status, _, confirm = client.post(
        "/failures/retry", f"runs={quote(runs)}&reason=vendor+back&csrf={csrf}"
    )
    assert status == 200 and 'id="confirm-count">31<' in confirm
    assert f'data-run="{nights[2]}"' in confirm and 'name="confirm" value="yes"' in confirm
    assert operator.requests() == [] and not [
        r for r in operator.runs("sample.nightly") if r.outcome == "pending"
    ]
    status, _, done = client.post(
        "/failures/retry", f"runs={quote(runs)}&reason=vendor+back&confirm=yes&csrf={csrf}"
    )
    assert status == 200 and "retries queued: 31" in done and "not retried: 0" in done
    pending = [r for r in operator.runs("sample.nightly") if r.outcome == "pending"]
    assert [(r.occurrence, r.attempt, r.requested_by) for r in pending] == [(_night(2), 2, "bob")]
    with reading(operator.engine) as connection:
        logged = search_changes(connection, ChangeSearch(), 1000, oldest_first=True)
    assert sum(1 for c in logged if c.action == "retry") == 31
    # Once: the same runs again are all refused (their retries are queued).
    again = client.post(
        "/failures/retry", f"runs={quote(runs)}&reason=again&confirm=yes&csrf={csrf}"
    )[2]
    assert "retries queued: 0" in again and "not retried: 31" in again
    assert client.post("/failures/retry", f"runs=&reason=x&csrf={csrf}")[0] == 400
    assert client.post("/failures/retry", f"runs={nights[2]}&reason=x&csrf=forged")[0] == 403


def test_a_retried_manual_runs_page_names_the_attempt_it_retried(
    client: Client, operator: Operator
) -> None:
    manual = operator.add_run("sample.ping", "failed", source="manual", error="refused")
    sign_in(client)
    csrf = csrf_of(client, f"/runs/{manual}")
    status, _, page = client.post(
        f"/runs/{manual}/retry", f"reason=once+more&confirm=yes&csrf={csrf}"
    )
    assert status == 200 and "retry queued" in page
    retry = next(r for r in operator.runs("sample.ping") if r.id != manual)
    assert f"Run <code>{retry.id}</code>" in page
    assert f'<dd id="run-retry-of"><a href="/runs/{manual}">attempt 1</a>' in page
    assert "Attempts at this manual run&#39;s work" in page or "manual run's work" in page
    attempts = page.split('id="attempts"', 1)[1].split("</table>", 1)[0]
    assert f'href="/runs/{manual}"' in attempts and f'href="/runs/{retry.id}"' in attempts
    first = client.get(f"/runs/{manual}")[2]
    assert 'id="run-retry-of"' not in first
    assert f'href="/runs/{retry.id}"' in first.split('id="attempts"', 1)[1]
