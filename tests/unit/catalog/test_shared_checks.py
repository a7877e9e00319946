"""A catalog checks each distinct trigger once, yet every problem still names its own job, its
field and its fix, and jobs that differ only in where a trigger came from are told apart."""

from __future__ import annotations

from tests.unit.catalog.plugin_files import Plugins


def test_every_job_sharing_a_broken_expression_gets_its_own_problem(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="61 3 * * *")',
        'job("files.sweep", cron="61 3 * * *")',
        'job("files.trim", cron="61 3 * * *")',
    )
    catalog = plugins.catalog(jobs={"files.trim": {"cron": "1 3 * * *"}})
    lines = [problem.line() for problem in catalog.problems]
    assert lines == [
        f"files.{name} (module files) [cron-syntax]: cron expression '61 3 * * *': "
        "minute field '61': 61 is out of range 0-59; "
        f'fix the expression in the declaration or in [jobs."files.{name}"]'
        for name in ("purge", "sweep", "trim")
    ]
    # The override makes trim runnable here; its declaration is still wrong everywhere else.
    assert list(catalog.jobs) == ["files.trim"]


def test_an_unused_dst_policy_is_named_for_each_job(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="*/5 * * * *", timezone="Europe/Berlin")',
        'job("files.sweep", cron="*/5 * * * *", timezone="Europe/Berlin")',
    )
    policy = {"dst_gap": "skip"}
    catalog = plugins.catalog(jobs={"files.purge": policy, "files.sweep": policy})
    assert [(p.job, p.code) for p in catalog.problems] == [
        ("files.purge", "dst-policy-unused"),
        ("files.sweep", "dst-policy-unused"),
    ]


def test_jobs_on_one_trigger_share_it_and_an_override_keeps_its_source(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="0 3 * * *", timezone="Europe/Berlin")',
        'job("files.sweep", cron="0 3 * * *", timezone="Europe/Berlin")',
        'job("files.trim", interval=timedelta(hours=1), timezone="Europe/Berlin")',
    )
    catalog = plugins.catalog(jobs={"files.trim": {"cron": "0 3 * * *"}})
    assert catalog.ok, catalog.problems
    purge, sweep, trim = (catalog.get(f"files.{n}") for n in ("purge", "sweep", "trim"))
    assert purge.trigger is sweep.trigger
    assert purge.trigger.source == "declaration"
    assert (trim.trigger.kind, trim.trigger.expression, trim.trigger.source) == (
        "cron",
        "0 3 * * *",
        "override",
    )
    assert trim.declared.kind == "interval"
