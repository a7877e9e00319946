"""The overview over its summary read, on both stores: paging and filters on the server,
critical failing jobs first, the last-run cell's streak and error line, and the few seconds'
cache that an action clears."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.store import Store
from jobhost.web.console.pages import Console
from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, serve_console

JOBS = [
    {"name": f"sample.job-{index:02d}", "interval": "1h", "critical": index % 7 == 0}
    for index in range(60)
]


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(JOBS)
    made.sync()
    yield made
    made.close()


@pytest.fixture
def console(operator: Operator) -> Console:
    return Console(
        operator.settings, operator.catalog(), Store(operator.engine), allow_actions=False
    )


@pytest.fixture
def client(console: Console, operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=False, console=console) as made:
        yield made


def _jobs(page: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', page)


def _cell(page: str, job: str) -> str:
    found = re.search(rf'<tr data-job="{re.escape(job)}".*?<td class="last">(.*?)</td>', page, re.S)
    assert found is not None, job
    return found[1]


def test_failing_jobs_show_their_streak_and_error_line_critical_first(
    operator: Operator, client: Client
) -> None:
    start = now() - timedelta(hours=5)
    operator.add_run("sample.job-03", "succeeded", started=start)
    for hour in (1, 2, 3):
        operator.add_run(
            "sample.job-03",
            "failed",
            started=start + timedelta(hours=hour),
            error="disk full on /var/data\nTraceback (most recent call last): ...",
        )
    operator.add_run("sample.job-14", "failed", started=start, error="HTTP 503 from upstream")
    operator.add_run("sample.job-20", "succeeded", started=start)

    page = client.get("/?state=failing&sort=state")[2]
    assert _jobs(page) == ["sample.job-14", "sample.job-03"]  # job-14 is critical
    three = _cell(page, "sample.job-03")
    assert "3 in a row" in three
    assert '<div class="error-line small">disk full on /var/data</div>' in three
    assert "Traceback" not in three
    assert "first failure" in _cell(page, "sample.job-14")
    assert "HTTP 503 from upstream" in _cell(page, "sample.job-14")
    summary = client.get("/")[2]
    assert "failing <b>2</b>" in summary
    succeeded = _cell(summary, "sample.job-20")
    assert "succeeded" in succeeded and "in a row" not in succeeded
    assert "error-line" not in succeeded


def test_the_overview_pages_on_the_server_keeping_the_filter(client: Client) -> None:
    first = client.get("/?q=job&sort=name")[2]
    assert _jobs(first) == [f"sample.job-{index:02d}" for index in range(50)]
    assert 'href="?q=job&amp;sort=name&amp;page=2" rel="next"' in first
    second = client.get("/?q=job&sort=name&page=2")[2]
    assert _jobs(second) == [f"sample.job-{index:02d}" for index in range(50, 60)]
    assert _jobs(client.get("/?q=job&page=999")[2]) == _jobs(second)
    assert _jobs(client.get("/?page=-3")[2]) == _jobs(first)
    assert _jobs(client.get("/?q=job-5")[2]) == [f"sample.job-{i}" for i in range(50, 60)]


def test_viewers_share_a_read_for_a_few_seconds_and_an_action_clears_it(
    operator: Operator,
) -> None:
    console = Console(
        operator.settings,
        operator.catalog(),
        Store(operator.engine),
        allow_actions=False,
        overview_seconds=3600,
    )
    with serve_console(operator, allow_actions=False, console=console) as client:
        assert "never run" in _cell(client.get("/")[2], "sample.job-05")
        operator.add_run("sample.job-05", "failed", error="boom")
        for _ in range(3):
            assert "never run" in _cell(client.get("/")[2], "sample.job-05")
        assert "never run" in _cell(client.get("/?page=1")[2], "sample.job-05")
        # One summary read served every viewer and filter.
        assert console._summaries.made == 1
        client.post("/signout", "")  # any action, even a refused one, clears the cache
        assert "boom" in _cell(client.get("/")[2], "sample.job-05")
        assert console._summaries.made == 2
