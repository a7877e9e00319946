"""Migration 0012 folds the dashboard's old ``console_actions`` rows into the one change log:
each action once (a row the change log already has is not copied twice), the table dropped,
and ``runs`` gains the cancel request's columns; on both stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.resources import files

from alembic import command
from alembic.config import Config
from sqlalchemy import column, inspect, table

from jobhost.records import ChangeSearch
from jobhost.store import create_store_engine, upgrade
from jobhost.store.engine import UTCDateTime, reading
from jobhost.store.runtime import search_changes

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def test_console_actions_are_folded_into_the_change_log(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
            config.attributes["connection"] = connection
            command.upgrade(config, "0008")
        console = table(
            "console_actions",
            column("id"),
            column("at", UTCDateTime()),
            column("actor"),
            column("action"),
            column("job_name"),
            column("reason"),
            column("client"),
            column("result"),
        )
        changes = table(
            "job_changes",
            column("at", UTCDateTime()),
            column("actor"),
            column("action"),
            column("job_name"),
            column("reason"),
        )
        with engine.begin() as connection:
            # Since 0005 the dashboard wrote both: this one is in the change log already.
            connection.execute(
                changes.insert().values(
                    at=T0, actor="bob", action="pause", job_name="a.job", reason="disk"
                )
            )
            connection.execute(
                console.insert(),
                [
                    {
                        "id": "1",
                        "at": T0,
                        "actor": "bob",
                        "action": "pause",
                        "job_name": "a.job",
                        "reason": "disk",
                        "client": "10.0.0.1",
                        "result": "paused",
                    },
                    {
                        "id": "2",
                        "at": T0,
                        "actor": "ann",
                        "action": "trigger",
                        "job_name": "a.job",
                        "reason": "rerun",
                        "client": "10.0.0.2",
                        "result": "trigger queued (request 9)",
                    },
                ],
            )
        upgrade(engine)
        assert not inspect(engine).has_table("console_actions")
        columns = {c["name"] for c in inspect(engine).get_columns("runs")}
        assert {"cancel_requested_by", "cancel_requested_at", "cancel_reason"} <= columns
        with reading(engine) as connection:
            logged = search_changes(connection, ChangeSearch(), 100, oldest_first=True)
        assert [(c.actor, c.action, c.reason, c.at) for c in logged] == [
            ("bob", "pause", "disk", T0),
            ("ann", "trigger", "rerun", T0),
        ]
        assert logged[1].after == {
            "client": "10.0.0.2",
            "result": "trigger queued (request 9)",
            "surface": "dashboard",
        }
        assert json.dumps(logged[0].after) == "null"
    finally:
        engine.dispose()
