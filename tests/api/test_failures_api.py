"""``GET /api/v1/failures``: failed runs of every job over HTTP (scope read), paged by cursor,
filtered by time, job and error text, every bad parameter refused; on both stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine

from jobhost.store.schema import runs
from tests.api.api_support import call, served_api


class Api:
    def __init__(self, base: str, engine: Engine) -> None:
        self.base = base
        self.engine = engine

    def add_run(
        self,
        job: str,
        outcome: str,
        ago: timedelta,
        error: str | None = None,
        *,
        scheduled: bool = False,
    ) -> str:
        """A run, of no occurrence unless ``scheduled`` (then of the minute it started in)."""
        run_id = uuid.uuid4().hex
        finished = datetime.now(UTC) - ago
        occurrence = finished.replace(second=0, microsecond=0) if scheduled else None
        with self.engine.begin() as connection:
            connection.execute(
                runs.insert().values(
                    id=run_id,
                    job_name=job,
                    occurrence=occurrence,
                    attempt=1,
                    source="schedule",
                    outcome=outcome,
                    queued_at=finished - timedelta(seconds=2),
                    started_at=finished - timedelta(seconds=2),
                    finished_at=finished,
                    error_type="Failure" if error else None,
                    error_message=error,
                )
            )
        return run_id

    def get(self, query: dict[str, str] | str = "", token: str | None = "reader") -> Any:
        text = query if isinstance(query, str) else urlencode(query)
        return call(self.base, "GET", f"/api/v1/failures?{text}", token=token)


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with served_api(store_url) as (base, engine):
        yield Api(base, engine)


def test_failures_page_by_cursor_newest_first_and_filter(api: Api) -> None:
    older = [
        api.add_run("billing.invoices", "failed", timedelta(hours=h), f"HTTP {500 + h} upstream")
        for h in range(10, 2, -1)
    ]
    newest = api.add_run("files.cleanup", "timed_out", timedelta(hours=1), "took too long")
    api.add_run("files.cleanup", "succeeded", timedelta(minutes=5))
    expected = [newest, *older[::-1]]

    answer = api.get()
    assert answer.status == 200
    assert [row["run_id"] for row in answer.body["failures"]] == expected
    first = answer.body["failures"][0]
    assert (first["job"], first["outcome"], first["error"], first["streak"]) == (
        "files.cleanup",
        "timed_out",
        "took too long",
        0,  # its newest attempt succeeded
    )
    assert answer.body["failures"][1]["streak"] == 8

    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        page = api.get({"limit": "4", **({"cursor": cursor} if cursor else {})})
        assert page.status == 200
        seen += [row["run_id"] for row in page.body["failures"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert seen == expected

    found = api.get({"q": "503"})
    assert [row["run_id"] for row in found.body["failures"]] == [older[-1]]
    one_job = api.get({"job": "files.cleanup"})
    assert [row["run_id"] for row in one_job.body["failures"]] == [newest]
    recent = api.get({"since": "4h30m"})
    assert [row["run_id"] for row in recent.body["failures"]] == [newest, older[-1], older[-2]]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("since=soon", "since"),
        ("since=-1h", "since"),
        ("since=2026-11-28T06:00:00", "since"),
        ("cursor=not-a-cursor", "cursor"),
        ("cursor=" + "A" * 300, "cursor"),
        ("q=" + "x" * 201, "q"),
        ("job=" + "j" * 201, "job"),
        ("since=1w2d3h4m", "since"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(api: Api, query: str, field: str) -> None:
    answer = api.get(query)
    assert answer.status == 400
    assert answer.content_type.startswith("application/problem+json")
    assert [error["field"] for error in answer.body["errors"]] == [field]
    assert "nobody.knows-me" not in answer.body["detail"]  # the caller's text is not echoed


def test_an_unknown_job_is_not_found_and_not_echoed(api: Api) -> None:
    answer = api.get("job=nobody.knows-me")
    assert answer.status == 404
    assert [error["field"] for error in answer.body["errors"]] == ["job"]
    assert "nobody.knows-me" not in answer.body["detail"]


def test_the_read_scope_is_needed(api: Api) -> None:
    assert api.get(token=None).status == 401
    assert api.get(token="deployer").status == 200
    assert api.get(token="ops").status == 200


def test_open_failures_by_default_and_a_bulk_retry_of_one_job(api: Api) -> None:
    invoices = api.add_run(
        "billing.invoices", "failed", timedelta(hours=2), "HTTP 503", scheduled=True
    )
    cleanup = api.add_run("files.cleanup", "failed", timedelta(hours=1), "disk full")
    body = {"job": "billing.invoices", "reason": "upstream fixed"}
    assert call(api.base, "POST", "/api/v1/failures", token="reader", body=body).status == 403
    bad = call(api.base, "POST", "/api/v1/failures", token="ops", body={"job": "x"})
    assert bad.status == 422 and [e["field"] for e in bad.body["errors"]] == ["reason"]

    queued = call(api.base, "POST", "/api/v1/failures", token="ops", body=body)
    assert queued.status == 202, queued.body
    assert [(q["retry_of"], q["job"]) for q in queued.body["queued"]] == [
        (invoices, "billing.invoices")
    ]
    assert queued.body["refused"] == [] and queued.body["more"] is False
    again = call(api.base, "POST", "/api/v1/failures", token="ops", body=body)
    assert again.body["queued"] == [] and [r["run_id"] for r in again.body["refused"]] == [invoices]

    retry_id = queued.body["queued"][0]["run_id"]
    with api.engine.begin() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.id == retry_id)
            .values(
                outcome="succeeded", started_at=datetime.now(UTC), finished_at=datetime.now(UTC)
            )
        )
    open_now = api.get()
    assert [row["run_id"] for row in open_now.body["failures"]] == [cleanup]
    assert open_now.body["groups"][0]["count"] == 1
    everything = api.get({"all": "true"})
    resolved = {row["run_id"]: row["resolved"] for row in everything.body["failures"]}
    assert resolved[cleanup] is None
    assert resolved[invoices]["how"] == "succeeded"
    assert resolved[invoices]["run_id"] == retry_id
    assert resolved[invoices]["by"] == "ops"
    assert api.get({"all": "yes"}).status == 400
