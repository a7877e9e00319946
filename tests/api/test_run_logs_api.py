"""``GET /api/v1/runs/{id}/logs``: a run's lines over HTTP (scope read), tailed with ``after``,
on both stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from jobhost.records import LogLine
from jobhost.store.schema import runs
from tests.api.api_support import SECRETS, call, served_api
from tests.support import append_lines

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


class Api:
    def __init__(self, base: str, engine: Engine) -> None:
        self.base = base
        self.engine = engine

    def add_run(self, outcome: str, lines: list[tuple[int, str, str]]) -> str:
        """A run of ``sample.job`` with the lines ``(seq, level, message)``, 10 bytes apart."""
        run_id = uuid.uuid4().hex
        with self.engine.begin() as connection:
            connection.execute(
                runs.insert().values(
                    id=run_id,
                    job_name="sample.job",
                    attempt=1,
                    source="manual",
                    outcome=outcome,
                    queued_at=T0,
                    started_at=T0,
                    finished_at=None if outcome == "running" else T0 + timedelta(seconds=5),
                )
            )
            append_lines(
                connection,
                [
                    LogLine(
                        run_id,
                        seq,
                        int((T0 + timedelta(milliseconds=seq)).timestamp() * 1_000_000),
                        level,
                        message,
                        offset=(seq - 1) * 10,
                        size=10,
                    )
                    for seq, level, message in lines
                ],
            )
        return run_id

    def get(self, path: str, token: str | None = "reader") -> tuple[int, object]:
        answer = call(self.base, "GET", f"/api/v1{path}", token=token)
        return answer.status, answer.body


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with served_api(store_url) as (base, engine):
        yield Api(base, engine)


def test_a_runs_lines_in_order_with_the_gap_and_tailing_after_a_line(api: Api) -> None:
    lines = [(1, "INFO", "start"), (2, "WARNING", "slow disk"), (9, "ERROR", "gave up")]
    run_id = api.add_run("failed", lines)
    status, body = api.get(f"/runs/{run_id}/logs")
    assert status == 200
    assert body == {
        "run_id": run_id,
        "job": "sample.job",
        "outcome": "failed",
        "running": False,
        "lines": [
            {"seq": 1, "time": "2026-05-04T10:00:00.001Z", "level": "INFO", "message": "start"},
            {
                "seq": 2,
                "time": "2026-05-04T10:00:00.002Z",
                "level": "WARNING",
                "message": "slow disk",
            },
            {"dropped": {"lines": 6, "bytes": 60}},
            {
                "seq": 9,
                "time": "2026-05-04T10:00:00.009Z",
                "level": "ERROR",
                "message": "gave up",
            },
        ],
        "next_after": 9,
    }
    status, tail = api.get(f"/runs/{run_id}/logs?after=2")
    assert status == 200
    assert isinstance(tail, dict)
    assert tail["lines"][0] == {"dropped": {"lines": 6, "bytes": 60}}
    assert [line.get("seq") for line in tail["lines"]] == [None, 9]
    status, nothing = api.get(f"/runs/{run_id}/logs?after=9")
    assert isinstance(nothing, dict)
    assert nothing["lines"] == [] and nothing["next_after"] == 9


def test_a_running_run_says_so_and_its_lines_can_be_paged(api: Api) -> None:
    run_id = api.add_run("running", [(i, "INFO", f"line {i}") for i in range(1, 6)])
    status, body = api.get(f"/runs/{run_id}/logs?limit=2")
    assert status == 200 and isinstance(body, dict)
    assert body["running"] is True
    assert [line["seq"] for line in body["lines"]] == [1, 2]
    _, more = api.get(f"/runs/{run_id}/logs?after={body['next_after']}&limit=2")
    assert isinstance(more, dict)
    assert [line["seq"] for line in more["lines"]] == [3, 4]


def test_unknown_runs_bad_queries_and_missing_tokens_are_refused(api: Api) -> None:
    run_id = api.add_run("succeeded", [(1, "INFO", "ok")])
    status, body = api.get("/runs/%3Cscript%3Ealert(1)%3Cscript%3E/logs")
    assert status == 404
    assert isinstance(body, dict) and "script" not in str(body)
    assert "no run with this id" in body["detail"]
    assert api.get("/runs/" + "x" * 500 + "/logs")[0] == 404
    assert api.get(f"/runs/{run_id}/logs?after=-1")[0] == 400
    assert api.get(f"/runs/{run_id}/logs?after=abc")[0] == 400
    assert api.get(f"/runs/{run_id}/logs?limit=0")[0] == 400
    assert api.get(f"/runs/{run_id}/logs", token=None)[0] == 401
    assert api.get(f"/runs/{run_id}/logs", token="wrong-secret-0123456789")[0] == 401
    # Every token here has the read scope, so each one may read the lines.
    assert {api.get(f"/runs/{run_id}/logs", token=name)[0] for name in SECRETS} == {200}
