"""Run ids people can type: ``logs``, ``retry`` and ``cancel`` take a unique start of a run id of
8 characters or more; an ambiguous one lists its runs (exit 2), an unknown one is the commands'
own "no run" answer. Real ``jobhost`` processes, on both stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from jobhost.operations.runs import resolve_run_id
from jobhost.store import Store
from jobhost.store.schema import runs
from tests.cli.operator_support import Operator, now

JOB = "sample.billing"
ONE = "4fe92f73" + "a" * 24
TWO = "4fe92f73" + "b" * 24
LAST = "f" * 32


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure([{"name": JOB, "interval": "1h"}])
    made.sync()
    yield made
    made.close()


def _run(operator: Operator, run_id: str, outcome: str, minutes_ago: int) -> None:
    made = operator.add_run(
        JOB, outcome, started=now() - timedelta(minutes=minutes_ago), error="HTTP 503"
    )
    with operator.engine.begin() as connection:
        connection.execute(update(runs).where(runs.c.id == made).values(id=run_id))


def test_a_unique_prefix_names_its_run_and_an_ambiguous_one_lists_them(
    operator: Operator,
) -> None:
    _run(operator, ONE, "failed", 3)
    _run(operator, TWO, "succeeded", 2)
    _run(operator, LAST, "failed", 1)

    unique = operator.jobhost("logs", "4FE92F73A", "--json")
    assert unique.returncode == 0, unique.stderr
    assert json.loads(unique.stdout)["run_id"] == ONE

    ambiguous = operator.jobhost("logs", "4fe92f73")
    assert ambiguous.returncode == 2, ambiguous.stderr
    lines = ambiguous.stderr.splitlines()
    assert lines[0] == (
        "jobhost: run id '4fe92f73' is ambiguous: it starts 2 run ids; type more of it:"
    )
    assert [line.split()[:3] for line in lines[1:]] == [
        [ONE, JOB, "failed"],
        [TWO, JOB, "succeeded"],
    ]

    # The last prefix of all has no upper bound to read up to.
    assert json.loads(operator.jobhost("logs", "ffffffff", "--json").stdout)["run_id"] == LAST

    unknown = operator.jobhost("logs", "0123abcd")
    assert unknown.returncode == 3
    assert "jobhost: no run '0123abcd' in the ledger" in unknown.stderr
    short = operator.jobhost("logs", "4fe92f7")
    assert short.returncode == 3 and "no run '4fe92f7'" in short.stderr


def test_retry_and_cancel_take_a_prefix(operator: Operator) -> None:
    _run(operator, ONE, "failed", 3)
    _run(operator, TWO, "succeeded", 2)

    retried = operator.jobhost("retry", "4fe92f73a", "--reason", "INC-1", "--no-wait", "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["retry_of"] == ONE

    cancelled = operator.jobhost("cancel", "4fe92f73b", "--reason", "INC-2")
    assert cancelled.returncode == 3
    assert TWO in cancelled.stderr

    assert operator.jobhost("cancel", "4fe92f73", "--reason", "INC-3").returncode == 2


def test_an_exact_id_wins_over_the_longer_ids_it_starts(operator: Operator) -> None:
    _run(operator, "4fe92f73", "failed", 2)
    _run(operator, ONE, "failed", 1)

    assert resolve_run_id(Store(operator.engine), "4fe92f73") == "4fe92f73"
    assert resolve_run_id(Store(operator.engine), "4fe92f73a") == ONE
