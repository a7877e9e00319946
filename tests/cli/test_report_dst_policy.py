"""``jobhost report`` names a job's daylight-saving policy when it is not the default."""

from __future__ import annotations

from tests.cli.operator_support import Operator

NIGHTLY = {"name": "sample.nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}


def test_a_non_default_policy_is_shown_and_the_default_is_not(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure(
        [NIGHTLY, {**NIGHTLY, "name": "sample.plain"}],
        overrides={"sample.nightly": {"dst_gap": "skip", "dst_repeat": "both"}},
    )
    operator.sync()
    done, report = operator.json("report")
    assert done.returncode == 0, done.stderr
    jobs = {job["name"]: job for job in report["jobs"]}
    assert jobs["sample.nightly"]["effective_trigger"]["dst_policy"] == (
        "dst_gap=skip, dst_repeat=both"
    )
    assert "dst_policy" not in jobs["sample.plain"]["effective_trigger"]
    assert "dst_policy" not in jobs["sample.nightly"]["declared_trigger"]

    text = operator.jobhost("report", "--all", "--long").stdout
    assert "cron '30 2 * * *' (Europe/Berlin; dst_gap=skip, dst_repeat=both)" in text
    assert text.count("dst_gap") == 1


def test_a_changed_policy_is_a_new_catalog_version(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    versions = []
    for policy in ({"dst_gap": "shift"}, {"dst_gap": "skip"}, {"dst_repeat": "both"}):
        operator.configure([NIGHTLY], overrides={"sample.nightly": policy})
        done, plan = operator.json("plan")
        assert done.returncode == 0, done.stderr
        versions.append(plan["catalog_version"])
    # The override section is the source of all three; only the policy differs.
    assert len(set(versions)) == 3
