"""The dashboard's pages of every change and every backfill, over HTTP: the change log newest
first, searched by who, action, job, module and since when, a page at a time; a filter it
cannot read is a 400 that says why; everything a person typed is escaped. The backfills of
every job, or of one, with their progress; both linked from every page's navigation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from jobhost.store.backfills import create_backfill
from jobhost.store.runtime import ChangeEntry
from jobhost.web.console.views import CHANGES_PAGE
from tests.cli.operator_support import Operator, now
from tests.web.console_support import Client, serve_console

HOSTILE = "<script>document.title='pwned'</script>"


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[Operator]:
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    made.configure(
        [
            {"name": "billing.invoices", "interval": "1h"},
            {"name": "billing.reminders", "interval": "1h"},
            {"name": "files_x.cleanup", "interval": "1h"},
            {"name": "filesyx.cleanup", "interval": "1h"},
        ]
    )
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(operator: Operator) -> Iterator[Client]:
    with serve_console(operator, allow_actions=False) as made:
        yield made


def _change(
    operator: Operator, actor: str, action: str, job: str, *, ago: timedelta, reason: str = ""
) -> None:
    with operator.engine.begin() as connection:
        entry = ChangeEntry(actor, reason or None, now() - ago)
        entry.log(connection, action, job, None, {"paused": action == "pause"})


def _ids(page: str) -> list[str]:
    return re.findall(r'<tr data-change="(\d+)"', page)


def _rows(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr data-change="\d+" data-actor="([^"]*)" data-action="([^"]*)"', page)


def test_the_change_log_is_searched_by_who_what_job_module_and_time(
    operator: Operator, client: Client
) -> None:
    _change(operator, "alice", "pause", "billing.invoices", ago=timedelta(days=3), reason="old")
    _change(operator, "bob", "trigger", "billing.reminders", ago=timedelta(hours=5))
    _change(operator, "alice", "resume", "billing.invoices", ago=timedelta(hours=1))
    _change(operator, "carol", "pause", "files_x.cleanup", ago=timedelta(minutes=5))
    _change(operator, "carol", "pause", "filesyx.cleanup", ago=timedelta(minutes=4))

    status, _headers, page = client.get("/changes")
    assert status == 200
    assert _rows(page) == [
        ("carol", "pause"),
        ("carol", "pause"),
        ("alice", "resume"),
        ("bob", "trigger"),
        ("alice", "pause"),
    ]
    assert 'href="/changes"' in page and 'href="/backfills"' in page
    assert _rows(client.get("/changes?actor=alice")[2]) == [("alice", "resume"), ("alice", "pause")]
    assert _rows(client.get("/changes?action=pause&actor=carol")[2]) == [("carol", "pause")] * 2
    invoices = client.get("/changes?job=billing.invoices")[2]
    assert _rows(invoices) == [("alice", "resume"), ("alice", "pause")]
    assert len(_rows(client.get("/changes?module=billing")[2])) == 3
    # A module's `_` is a character, not a wildcard: files_x is not filesyx.
    assert 'data-change="4"' in client.get("/changes?module=files_x")[2]
    assert len(_rows(client.get("/changes?module=files_x")[2])) == 1
    assert _rows(client.get("/changes?since=2h")[2]) == [
        ("carol", "pause"),
        ("carol", "pause"),
        ("alice", "resume"),
    ]
    day = (now() - timedelta(days=1)).date().isoformat()
    assert len(_rows(client.get(f"/changes?since={day}")[2])) == 4
    assert "no change matches" in client.get("/changes?actor=nobody")[2]

    status, _headers, refused = client.get("/changes?since=yesterday-ish")
    assert status == 400
    assert 'id="change-problem"' in refused and "since" in refused


def test_the_change_log_pages_back_and_escapes_what_people_typed(
    operator: Operator, client: Client
) -> None:
    for index in range(CHANGES_PAGE + 5):
        _change(operator, "alice", "pause", "billing.invoices", ago=timedelta(minutes=index))
    _change(operator, HOSTILE, "pause", "billing.invoices", ago=timedelta(0), reason=HOSTILE)

    first = client.get("/changes?actor=alice")[2]
    ids = _ids(first)
    assert len(ids) == CHANGES_PAGE and ids == sorted(ids, key=int, reverse=True)
    (older,) = re.findall(r'href="([^"]+)" id="changes-older"', first)
    assert older == f"/changes?actor=alice&amp;before={ids[-1]}"
    second = client.get(older.replace("&amp;", "&"))[2]
    assert _ids(second) == [str(n) for n in range(5, 0, -1)]
    assert 'id="changes-older"' not in second
    assert 'href="/changes?actor=alice" id="changes-newest"' in second

    everyone = client.get("/changes")[2]
    assert HOSTILE not in everyone
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in everyone


def test_the_backfills_page_lists_every_jobs_backfills_with_their_progress(
    operator: Operator, client: Client
) -> None:
    assert "no backfill asked for yet" in client.get("/backfills")[2]
    t = now().replace(microsecond=0)
    with operator.engine.begin() as connection:
        for job, reason, hours in [
            ("billing.invoices", "replay the 503 nights", 2),
            ("files_x.cleanup", HOSTILE, 1),
        ]:
            create_backfill(
                connection,
                job=job,
                start=t - timedelta(days=3),
                end=t - timedelta(days=1),
                mode="all",
                reason=reason,
                actor="alice",
                concurrency=1,
                occurrences=[t - timedelta(days=2), t - timedelta(days=2, hours=1)],
                now=t - timedelta(hours=hours),
            )
    status, _headers, page = client.get("/backfills")
    assert status == 200
    assert re.findall(r'<td class="name"><a href="/jobs/([^"#]+)#', page) == [
        "files_x.cleanup",
        "billing.invoices",
    ]
    assert "replay the 503 nights" in page and "0 of 2" in page
    assert HOSTILE not in page and "&lt;script&gt;" in page
    one = client.get("/backfills?job=billing.invoices")[2]
    assert len(re.findall(r"<tr data-backfill=", one)) == 1
    assert "no backfill of sample.none" in client.get("/backfills?job=sample.none")[2]
