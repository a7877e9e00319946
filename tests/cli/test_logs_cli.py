"""``jobhost logs RUN_ID`` and ``jobhost history NAME --logs``: a run's lines as an operator reads
them, on both stores."""

from __future__ import annotations

import json
import os
import re
import sqlite3

from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.cli.operator_support import Operator

_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\w+) +(.*)$")


def _trigger(operator: Operator, job: str) -> str:
    # Generous: on a loaded machine a 200,000-line run in the command takes its time.
    done = operator.jobhost("trigger", job, "--json", timeout=600)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["run_id"])


def _store_bytes(operator: Operator) -> int:
    engine: Engine = operator.engine
    if engine.dialect.name == "sqlite":
        path = str(engine.url.database)
        with sqlite3.connect(path) as direct:
            direct.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))
    with engine.begin() as connection:
        return int(
            connection.execute(text("SELECT pg_total_relation_size('run_logs')")).scalar_one()
        )


def test_a_flood_of_200000_lines_costs_the_store_the_bounds_and_shows_both_ends(
    operator: Operator,
) -> None:
    operator.configure(
        [
            {
                "name": "sample.flood",
                "cron": "0 3 * * *",
                "behaviour": "log",
                "lines": 200_000,
                "width": 100,
            }
        ]
    )
    operator.sync()
    before = _store_bytes(operator)
    run_id = _trigger(operator, "sample.flood")  # no host: it runs in the command
    grown = _store_bytes(operator) - before
    assert grown <= 1_000_000, f"the store grew by {grown} bytes"
    shown = operator.jobhost("logs", run_id)
    assert shown.returncode == 0, shown.stderr
    printed = shown.stdout.splitlines()
    assert len(printed) == 1001
    assert _LINE.match(printed[0]).group(2).startswith("line 1.")  # type: ignore[union-attr]
    assert printed[500] == "… 199,000 lines (19.9 MB) dropped …"
    assert _LINE.match(printed[-1]).group(2).startswith("line 200000.")  # type: ignore[union-attr]


def test_logs_json_and_history_logs(operator: Operator) -> None:
    operator.configure(
        [
            {
                "name": "sample.talk",
                "cron": "0 3 * * *",
                "behaviour": "log",
                "lines": 30,
                "text": "<b>step {i}</b>",
            }
        ],
        run_log_lines=20,
    )
    operator.sync()
    first = _trigger(operator, "sample.talk")
    second = _trigger(operator, "sample.talk")
    done, body = operator.json("logs", first)
    assert done.returncode == 0, done.stderr
    assert body["run_id"] == first
    assert body["job"] == "sample.talk"
    assert body["outcome"] == "succeeded"
    assert body["running"] is False
    assert body["next_after"] == 30
    seqs = [*range(1, 11), None, *range(21, 31)]
    assert [entry.get("seq") for entry in body["lines"]] == seqs
    assert body["lines"][10] == {"dropped": {"lines": 10, "bytes": 140}}
    assert body["lines"][0]["message"] == "<b>step 1</b>"
    assert body["lines"][0]["level"] == "INFO"

    history = operator.jobhost("history", "sample.talk", "--logs")
    assert history.returncode == 0, history.stderr
    out = history.stdout
    assert f"log of run {second} (last lines; all: jobhost logs {second}):" in out
    assert f"log of run {first} (last lines; all: jobhost logs {first}):" in out
    # The last ten kept lines of each run under it.
    block = out.split(f"log of run {second}")[1].split("log of run")[0]
    assert "<b>step 30</b>" in block and "<b>step 21</b>" in block
    assert "<b>step 10</b>" not in block

    done, listed = operator.json("history", "sample.talk", "--logs")
    logs = {run["run_id"]: run["logs"] for run in listed["runs"]}
    assert logs[first][-1]["message"] == "<b>step 30</b>"
    assert len([e for e in logs[first] if "seq" in e]) == 10


def test_an_unknown_run_id_is_exit_3_with_a_clear_message(operator: Operator) -> None:
    operator.configure([{"name": "sample.talk", "cron": "0 3 * * *"}])
    for args in (["logs", "no-such-run"], ["logs", "no-such-run", "--follow", "--json"]):
        done = operator.jobhost(*args)
        assert done.returncode == 3
        assert done.stdout == ""
        assert "no run 'no-such-run' in the ledger" in done.stderr
        assert "jobhost history NAME" in done.stderr


def test_a_run_that_wrote_nothing_says_so(operator: Operator) -> None:
    operator.configure([{"name": "sample.quiet", "cron": "0 3 * * *"}])
    operator.sync()
    run_id = _trigger(operator, "sample.quiet")
    done = operator.jobhost("logs", run_id)
    assert done.returncode == 0
    assert done.stdout == ""
    assert "wrote no lines" in done.stderr


def test_a_runs_own_text_never_drives_the_terminal(operator: Operator) -> None:
    # An OSC sequence (set the window title) in what the job logged, its error and its
    # description: through the pipe here click strips colour codes only, as on no terminal.
    title = "\x1b]0;owned\x07"
    job = {"name": "sample.loud", "cron": "0 3 * * *", "behaviour": "log", "lines": 1}
    job |= {"description": f"desc {title}", "text": f"title {title}", "raise": f"err {title}"}
    operator.configure([job])
    operator.sync()
    triggered = operator.jobhost("trigger", "sample.loud", "--json")
    run_id = json.loads(triggered.stdout)["run_id"]
    for args in [
        ("trigger", "sample.loud"),
        ("logs", run_id),
        ("history", "sample.loud", "--logs"),
        ("failures", "--wide"),
        ("jobs", "show", "sample.loud"),
    ]:
        done = operator.jobhost(*args)
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout, args
        assert "\\x1b]0;owned\\x07" in done.stdout, (args, done.stdout)
    lines = json.loads(operator.jobhost("logs", run_id, "--json").stdout)["lines"]
    assert lines[0]["message"] == f"title {title}"
