"""From a streak to its replay in one step: a failing job's page offers "replay the N failed
occurrences since the streak began", and its form leads to the backfill preview filled with the
streak's range in mode ``failed``, listing those N occurrences. N counts occurrences by their
last attempt, as the alerts count the streak: a retry that failed again is one occurrence, a
missed one between failures is not replayed, a success before the streak bounds it. Once an
attempt succeeds the job is no longer failing and the offer is gone."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, add_operator_token, serve_console, sign_in

JOB = "sample.nightly"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Client, Operator]]:
    operator = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    operator.configure(
        [{"name": JOB, "cron": "0 3 * * *"}, {"name": "sample.hourly", "interval": "1h"}],
        console_actions=True,
    )
    add_operator_token(operator)
    operator.sync()
    try:
        with serve_console(operator, allow_actions=True) as client:
            sign_in(client)
            yield client, operator
    finally:
        operator.close()


def _form(page: str) -> dict[str, str]:
    found = re.search(r'<form [^>]*id="replay-streak-form".*?</form>', page, re.S)
    assert found is not None, "no replay form on the page"
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', found[0])
    return {name: html.unescape(value) for name, value in fields}


def test_a_failing_jobs_page_replays_its_streak_through_the_backfill_preview(
    site: tuple[Client, Operator],
) -> None:
    client, operator = site
    night = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)

    def nights_ago(days: int) -> str:
        return (night - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def run(days: int, outcome: str, attempt: int = 1) -> str:
        at = night - timedelta(days=days)
        return operator.add_run(
            JOB, outcome, started=at, occurrence=at, attempt=attempt, error="503"
        )

    run(5, "failed")  # before the success: not in the streak
    run(4, "succeeded")
    run(3, "failed")
    run(2, "failed")
    run(2, "failed", attempt=2)  # a retry that failed too: still one occurrence
    run(1, "missed")  # missed, not failed: a failed-mode backfill leaves it
    run(0, "timed_out")

    page = client.get(f"/jobs/{JOB}")[2]
    assert "Replay the 3 failed occurrences since the streak began" in page
    form = _form(page)
    assert (form["from"], form["mode"]) == (nights_ago(3), "failed")
    # The range ends just after the newest failure: the backfill excludes its end.
    assert form["to"] == nights_ago(0)[:-1] + ".000001Z"

    status, _, preview = client.post(
        f"/jobs/{JOB}/backfill", urlencode({**form, "reason": "INC-9: payments are back"})
    )
    assert status == 200 and 'id="backfill-confirm-form"' in preview
    assert re.findall(r"<li>([^<]+)</li>", preview) == [nights_ago(3), nights_ago(2), nights_ago(0)]
    assert "Mode failed: 3 of 4 occurrence(s)" in preview
    assert 'value="INC-9: payments are back"' in preview

    # A job that is not failing is offered nothing.
    operator.add_run("sample.hourly", "succeeded")
    assert 'id="replay-streak-form"' not in client.get("/jobs/sample.hourly")[2]
    # A success of the newest occurrence ends the streak, and the offer.
    run(0, "succeeded", attempt=2)
    assert 'id="replay-streak-form"' not in client.get(f"/jobs/{JOB}")[2]


def test_one_failed_night_is_offered_as_one_occurrence(site: tuple[Client, Operator]) -> None:
    client, operator = site
    at = now().replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)
    operator.add_run(
        JOB, "succeeded", started=at - timedelta(days=1), occurrence=at - timedelta(days=1)
    )
    operator.add_run(JOB, "failed", started=at, occurrence=at, error="disk full")
    page = client.get(f"/jobs/{JOB}")[2]
    assert "Replay the 1 failed occurrence since the streak began" in page
    assert 'for="replay-streak-reason"' in page
