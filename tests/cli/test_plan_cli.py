"""``jobhost plan``: the catalog against the store, added, changed (old -> new) and orphaned."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from jobhost.store.schema import hosts
from tests.cli.operator_support import Operator, now

BEFORE = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.hourly", "interval": "1h"},
    {"name": "sample.retired", "interval": "6h"},
]
AFTER = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.hourly", "interval": "1h", "enabled": False},
    {"name": "sample.fresh", "cron": "15 4 * * *", "timezone": "Europe/Berlin"},
]


def test_plan_lists_additions_changes_and_orphans_and_strict_fails(operator: Operator) -> None:
    operator.configure(BEFORE)
    done, plan = operator.json("plan")
    assert done.returncode == 0, done.stderr
    assert plan["changes"] is True
    assert [item["job"] for item in plan["added"]] == [
        "sample.hourly",
        "sample.nightly",
        "sample.retired",
    ]
    operator.sync()
    quiet = operator.jobhost("plan", "--strict")
    assert quiet.returncode == 0, quiet.stderr
    quiet_lines = quiet.stdout.splitlines()
    assert quiet_lines[0] == "no changes: the store matches the catalog"
    assert quiet_lines[1].startswith("this catalog: version ")
    assert quiet_lines[2] == "live hosts: none"

    operator.configure(AFTER, overrides={"sample.nightly": {"cron": "0 4 * * *"}})
    done, plan = operator.json("plan", "--strict")
    assert done.returncode == 1
    version = plan.pop("catalog_version")
    assert len(version) == 12 and plan.pop("hosts") == []
    assert plan == {
        "changes": True,
        "added": [
            {
                "job": "sample.fresh",
                "module": "sample",
                "after": "cron '15 4 * * *' Europe/Berlin",
            }
        ],
        "changed": [
            {
                "job": "sample.hourly",
                "before": "every 1h",
                "after": "every 1h (disabled)",
                "trigger_changed": False,
            },
            {
                "job": "sample.nightly",
                "before": "cron '0 3 * * *' UTC",
                "after": "cron '0 4 * * *' UTC",
                "trigger_changed": True,
            },
        ],
        "orphaned": [{"job": "sample.retired", "module": "sample", "before": "every 6h"}],
    }
    text = operator.jobhost("plan")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert "+ sample.fresh" in lines[0]
    assert any(line.startswith("~ sample.nightly") for line in lines)
    assert any(line.strip() == "-> cron '0 4 * * *' UTC" for line in lines)
    assert any(line.startswith("- sample.retired") and "orphaned" in line for line in lines)
    assert "1 to add, 2 to change, 1 to orphan" in lines
    assert f"this catalog: version {version}" in lines
    # Planning changes nothing.
    row = operator.schedule("sample.nightly")
    assert row is not None and row.trigger_expression == "0 3 * * *"
    assert operator.schedule("sample.fresh") is None


def test_an_invalid_catalog_has_no_plan(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure(BEFORE, modules={"extra": {"broken": True}}, extra_plugin=True)
    done = operator.jobhost("plan")
    assert done.returncode == 3
    assert done.stdout == ""
    assert "extra.broken" in done.stderr and "no plan until it is fixed" in done.stderr


def test_plan_names_the_catalog_version_of_every_live_host(operator: Operator) -> None:
    operator.configure(BEFORE)
    operator.sync()
    operator.add_host("old-replica")
    operator.add_host("new-replica")
    with operator.engine.begin() as connection:
        for host, version, synced in [
            ("old-replica", "aaaaaaaaaaaa", now()),
            ("new-replica", "bbbbbbbbbbbb", now() + timedelta(seconds=5)),
        ]:
            connection.execute(
                update(hosts)
                .where(hosts.c.id == host)
                .values(catalog_version=version, synced_at=synced)
            )
    done, plan = operator.json("plan")
    assert done.returncode == 0, done.stderr
    assert sorted((h["host"], h["catalog_version"]) for h in plan["hosts"]) == [
        ("new-replica", "bbbbbbbbbbbb"),
        ("old-replica", "aaaaaaaaaaaa"),
    ]
    text = operator.jobhost("plan").stdout.splitlines()
    (newest,) = [line for line in text if "newest sync" in line]
    assert newest.startswith("live host new-replica: catalog bbbbbbbbbbbb")
