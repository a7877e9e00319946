"""``jobhost state NAME``: what a job keeps through ``context.state``, read from the store, and
changed between runs with a reason that the change log keeps; refused while a run of the job
runs. Real ``jobhost`` processes, on both stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.cli.operator_support import Operator, now

JOB = "sample.counter"


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure([{"name": JOB, "cron": "0 3 * * *", "behaviour": "state"}])
    made.sync()
    yield made
    made.close()


def _state(operator: Operator) -> dict[str, str]:
    shown = operator.jobhost("state", JOB, "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["job"] == JOB and document["more"] is False
    return {entry["key"]: entry["value"] for entry in document["state"]}


def _trigger(operator: Operator) -> str:
    done = operator.jobhost("trigger", JOB, "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["outcome"])


def test_an_operator_reads_and_resets_what_the_job_stored(operator: Operator) -> None:
    assert operator.jobhost("state", JOB).stdout == f"{JOB}: no state\n"
    assert [_trigger(operator), _trigger(operator)] == ["succeeded", "succeeded"]
    assert _state(operator) == {"count": "2"}
    text = operator.jobhost("state", JOB).stdout.splitlines()
    assert text[0] == f"{JOB}: 1 key"
    assert text[1].startswith('  count = "2"  (updated ')

    changed = operator.jobhost("state", JOB, "--set", "count=10", "--reason", "replay INC-7")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.startswith(f'{JOB}: count set to "10" (was "2") by ')
    assert changed.stdout.rstrip().endswith(": replay INC-7")
    _trigger(operator)
    assert _state(operator) == {"count": "11"}

    same = operator.jobhost("state", JOB, "--set", "count=11", "--reason", "again", "--json")
    assert json.loads(same.stdout) == {
        "job": JOB,
        "key": "count",
        "before": "11",
        "after": "11",
        "changed": False,
    }
    gone = operator.jobhost("state", JOB, "--delete", "count", "--reason", "start over")
    assert gone.returncode == 0, gone.stderr
    assert _state(operator) == {}

    changes = json.loads(operator.jobhost("changes", "--job", JOB, "--json").stdout)["changes"]
    changes = [c for c in changes if c["action"] != "trigger"]
    assert [(c["action"], c["before"], c["after"], c["reason"]) for c in changes] == [
        (
            "state-set",
            {"key": "count", "value": "2"},
            {"key": "count", "value": "10"},
            "replay INC-7",
        ),
        (
            "state-delete",
            {"key": "count", "value": "11"},
            {"key": "count", "value": None},
            "start over",
        ),
    ]
    lines = operator.jobhost("changes", "--job", JOB).stdout.splitlines()
    assert any(line.endswith(f"  state-set  {JOB} count: replay INC-7") for line in lines)


def test_a_change_is_refused_while_a_run_of_the_job_runs(operator: Operator) -> None:
    running = operator.add_run(
        JOB,
        "running",
        started=now() - timedelta(seconds=5),
        lease_expires_at=now() + timedelta(minutes=1),
    )

    refused = operator.jobhost("state", JOB, "--set", "count=1", "--reason", "reset")

    assert refused.returncode == 3, refused.stderr
    assert f"refused: job {JOB} has a live run {running} (running on host replica-0" in (
        refused.stderr
    )
    assert f"jobhost cancel {running}" in refused.stderr
    assert _state(operator) == {}
    assert json.loads(operator.jobhost("changes", "--json").stdout)["changes"] == []


def test_bad_changes_are_usage_errors(operator: Operator) -> None:
    for args in [
        ("--set", "count=1"),
        ("--set", "count", "--reason", "x"),
        ("--set", "=1", "--reason", "x"),
        ("--set", "a=1", "--delete", "b", "--reason", "x"),
        ("--reason", "why"),
        ("--set", "count=1", "--reason", " "),
        ("--delete", "nothing", "--reason", "tidy"),
        ("--set", f"{'k' * 201}=1", "--reason", "x"),
    ]:
        done = operator.jobhost("state", JOB, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
    unknown = operator.jobhost("state", "sample.countr")
    assert unknown.returncode == 2 and "sample.counter" in unknown.stderr


def test_a_key_holding_control_characters_never_reaches_the_terminal_raw(
    operator: Operator,
) -> None:
    # Stdout is a pipe here, where click strips only CSI colour codes: an OSC title sequence is
    # what a terminal would act on.
    key = "cursor\x1b]0;owned\x07"
    changed = operator.jobhost("state", JOB, "--set", f"{key}=1", "--reason", "replay INC-7")
    assert changed.returncode == 0, changed.stderr
    listed = operator.jobhost("state", JOB)
    for done in (changed, listed):
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout
        assert "cursor\\x1b]0;owned\\x07" in done.stdout
    assert _state(operator) == {key: "1"}
