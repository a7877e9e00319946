"""The Failures page and a job's history over HTTP, without a browser, on both stores: paging on
the server, search by error text, filters in the address, the runs-by-outcome charts."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from jobhost.store.schema import job_state, runs
from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, serve_console


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(
        [{"name": "sample.busy", "interval": "1m"}, {"name": "sample.billing", "interval": "1h"}]
    )
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=False) as made:
        yield made


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-run="([^"]+)"', page)


def _counts(page: str, chart: str) -> dict[str, int]:
    svg = page[page.index(f'id="{chart}"') :]
    svg = svg[: svg.index("</svg>")]
    found: dict[str, int] = {}
    for outcome, count in re.findall(r'data-outcome="(\w+)" data-count="(\d+)"', svg):
        found[outcome] = found.get(outcome, 0) + int(count)
    return found


def test_the_failures_page_lists_searches_and_pages_failed_runs(
    client: Client, operator: Operator
) -> None:
    t = now()
    failed = [
        operator.add_run(
            "sample.billing",
            "failed",
            started=t - timedelta(minutes=10 * index + 5),
            error=f"HTTP {500 + index} from payments",
        )
        for index in range(60)
    ]
    timed_out = operator.add_run(
        "sample.busy", "timed_out", started=t - timedelta(minutes=2), error="took 60s"
    )
    operator.add_run("sample.busy", "succeeded", started=t - timedelta(minutes=1))

    status, headers, page = client.get("/failures")
    assert status == 200 and "default-src 'self'" in headers["content-security-policy"]
    assert 'href="/failures" id="nav-failures"' in page
    assert _rows(page) == [timed_out, *failed[:49]]
    assert f'href="/runs/{failed[0]}"' in page
    assert "HTTP 500 from payments" in page
    # The job's streak: sample.billing failed 60 times in a row, sample.busy recovered.
    streaks = re.findall(r'<td class="streak">(\d+\+?)</td>', page)
    assert streaks[:2] == ["0", "60"]
    older = re.search(r'href="(\?cursor=[^"]+)" id="failures-older"', page)
    assert older is not None
    second = client.get("/failures" + html.unescape(older[1]))[2]
    assert _rows(second) == failed[49:]
    assert 'id="failures-older"' not in second and 'id="failures-newest"' in second

    search = client.get("/failures?q=503")[2]
    assert _rows(search) == [failed[3]]
    assert 'value="503"' in search
    assert _rows(client.get("/failures?q=nothing-like-it")[2]) == []
    assert _rows(client.get("/failures?job=sample.busy")[2]) == [timed_out]
    assert _rows(client.get("/failures?since=30m")[2]) == [timed_out, *failed[:3]]
    # The installation's chart counts the last 24 hours: every run above finished in it.
    assert _counts(page, "installation-chart") == {"failed": 60, "timed_out": 1, "succeeded": 1}
    assert _counts(client.get("/failures?range=1h")[2], "installation-chart") == {
        "failed": 6,
        "timed_out": 1,
        "succeeded": 1,
    }


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("since=soon", "since: is neither a duration nor a time"),
        ("cursor=bogus", "cursor: is not a cursor this list gave"),
        ("job=sample.nobody", "job: unknown job"),
    ],
)
def test_a_filter_that_cannot_be_read_is_a_400_saying_which(
    client: Client, query: str, says: str
) -> None:
    status, _, page = client.get(f"/failures?{query}")
    assert status == 400
    assert says in html.unescape(page)
    assert _rows(page) == []


def test_a_jobs_history_pages_on_the_server_with_an_outcome_filter(
    client: Client, operator: Operator
) -> None:
    t = now()
    made = []
    for index in range(60):
        outcome = "failed" if index % 10 == 0 else "succeeded"
        made.append(
            operator.add_run(
                "sample.busy",
                outcome,
                started=t - timedelta(seconds=50 * (index + 1)),
                error="boom" if outcome == "failed" else None,
            )
        )
    operator.add_run("sample.busy", "succeeded", started=t - timedelta(hours=2))
    operator.add_run("sample.busy", "succeeded", started=t - timedelta(days=20))

    page = client.get("/jobs/sample.busy")[2]
    assert _rows(page) == made[:25]
    older = re.search(r'href="([^"]+)" id="history-older"', page)
    assert older is not None and "page=2" in older[1]
    second = client.get("/jobs/sample.busy" + html.unescape(older[1]))[2]
    assert _rows(second) == made[25:50]
    assert 'id="history-newer"' in second
    third = client.get("/jobs/sample.busy?page=3")[2]
    assert len(_rows(third)) == 12 and 'id="history-older"' not in third

    failures = client.get("/jobs/sample.busy?outcome=failed")[2]
    assert _rows(failures) == [made[index] for index in range(0, 60, 10)]
    assert 'id="outcome-succeeded"' in failures
    missed = client.get("/jobs/sample.busy?outcome=missed")[2]
    assert _rows(missed) == [] and "no missed runs" in missed
    # An outcome the ledger does not have is ignored, not an error.
    assert _rows(client.get("/jobs/sample.busy?outcome=exploded")[2]) == made[:25]

    assert _counts(page, "job-chart") == {"failed": 6, "succeeded": 55}
    hour = client.get("/jobs/sample.busy?range=1h")[2]
    assert "Runs in the last hour" in hour
    assert _counts(hour, "job-chart") == {"failed": 6, "succeeded": 54}
    month = client.get("/jobs/sample.busy?range=30d")[2]
    assert "Runs in the last 30 days" in month
    assert _counts(month, "job-chart") == {"failed": 6, "succeeded": 56}
    # Filters survive a change of range, and the range a change of filter.
    assert (
        'href="?range=30d&amp;outcome=failed"' in client.get("/jobs/sample.busy?outcome=failed")[2]
    )


def test_the_installations_chart_is_kept_a_minute_and_the_list_is_not(
    client: Client, operator: Operator
) -> None:
    operator.add_run("sample.busy", "failed", started=now() - timedelta(minutes=3), error="a")
    first = client.get("/failures")[2]
    assert _counts(first, "installation-chart") == {"failed": 1}
    newer = operator.add_run("sample.busy", "failed", started=now() - timedelta(minutes=1))
    again = client.get("/failures")[2]
    assert _rows(again)[0] == newer
    assert _counts(again, "installation-chart") == {"failed": 1}


def test_the_run_page_shows_what_the_run_returned(client: Client, operator: Operator) -> None:
    run_id = operator.add_run("sample.busy", "succeeded", started=now() - timedelta(minutes=1))
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs).where(runs.c.id == run_id).values(result='{"reminded":10,"x":"<b>"}')
        )

    page = client.get(f"/runs/{run_id}")[2]

    assert (
        '<dt>result</dt><dd id="run-result"><code>{&#34;reminded&#34;:10,&#34;x&#34;:'
        "&#34;&lt;b&gt;&#34;}</code></dd>"
    ) in page


def test_the_job_page_shows_the_state_the_job_keeps(client: Client, operator: Operator) -> None:
    assert 'id="state-empty">no state kept' in client.get("/jobs/sample.busy")[2]
    with operator.engine.begin() as connection:
        connection.execute(
            job_state.insert(),
            [
                {"job_name": "sample.busy", "key": k, "value": v, "fencing_token": 3}
                | {"updated_at": now()}
                for k, v in [("cursor", "<tenant-042>"), ("count", "7")]
            ],
        )

    page = client.get("/jobs/sample.busy")[2]

    assert re.findall(
        r'<tr data-key="([^"]+)"><td><code>[^<]*</code></td><td><code>([^<]*)', page
    ) == [
        ("count", "7"),
        ("cursor", "&lt;tenant-042&gt;"),
    ]
