"""A release that upgrades the store's schema under a running host of this release, with a
change this release's statements cannot work with: the host says so in one line and stops
(exit 3) rather than failing every turn, and nothing it had claimed is left running."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from tests.process.conftest import ledger
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_host_whose_store_a_newer_release_upgraded_stops_with_one_line(cluster: Any) -> None:
    engine, (host,) = cluster(
        [{"name": "sample.steady", "cron": "* * * * * *"}],
        hosts=[{"JOBHOST_HOST_ID": "old"}],
        heartbeat_interval="1s",
    )
    wait_for(lambda: len(ledger(engine)) >= 2, 30, "the host to fire")
    # What a newer release's migration might do: a table this release reads every turn moves.
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0999'"))
        connection.execute(text("ALTER TABLE backfills RENAME TO backfills_next"))
    assert host.wait(30) == 3, host.log()
    lines = [line for line in host.log().splitlines() if "newer than this jobhost" in line]
    assert len(lines) == 1, host.log()
    assert "store schema 0999 is newer than this jobhost" in lines[0]
    assert "this host stops" in lines[0]
    assert "Traceback" not in host.log()
    assert [r.id for r in ledger(engine) if r.outcome == "running"] == []
