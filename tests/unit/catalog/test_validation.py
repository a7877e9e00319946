"""Catalog validation: one test per problem code, overrides, and every problem listed together.

Plugins are real files written into tmp_path and loaded through ``settings.plugins``; the
installed entry points are left out (``JOBHOST_LOAD_PLUGINS`` empty) so the bundled modules,
still placeholders, do not add their own problems.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobhost.catalog import Catalog, Problem, build_catalog
from jobhost.config import Settings
from jobhost.errors import UnknownJobError
from tests.unit.catalog.plugin_files import Plugins


def codes(catalog: Catalog) -> list[tuple[str | None, str]]:
    return [(problem.job, problem.code) for problem in catalog.problems]


def only(catalog: Catalog, code: str) -> Problem:
    found = [problem for problem in catalog.problems if problem.code == code]
    assert len(found) == 1, catalog.problems
    return found[0]


def test_clean_catalog_has_every_job_sorted_with_no_problems(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", interval=timedelta(hours=6))',
        'job("files.orphan-cleanup", cron="0 3 * * *", timezone="Europe/Berlin")',
    )
    catalog = plugins.catalog()
    assert catalog.ok
    assert catalog.problems == []
    assert list(catalog.jobs) == ["files.orphan-cleanup", "files.purge"]
    purge = catalog.get("files.purge")
    assert purge.trigger.kind == "interval"
    assert purge.trigger.expression == "6h"
    assert purge.trigger.source == "declaration"
    assert purge.plugin == str(plugins.files[0])
    assert purge.name == "files.purge"
    assert purge.module == "files"


def test_duplicate_name_names_both_modules_and_keeps_the_first(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *")', name="first")
    plugins.add('job("files.purge", module="other", cron="0 4 * * *")', name="second")
    catalog = plugins.catalog()
    problem = only(catalog, "duplicate-name")
    assert problem.job == "files.purge"
    assert "module files" in problem.message
    assert "module other" in problem.message
    assert "first.py" in problem.message
    assert "second.py" in problem.message
    assert catalog.get("files.purge").trigger.expression == "0 3 * * *"


def test_missing_executor(plugins: Plugins) -> None:
    plugins.add('(decl("files.purge", cron="0 3 * * *"), None)')
    catalog = plugins.catalog()
    problem = only(catalog, "missing-executor")
    assert (problem.job, problem.module) == ("files.purge", "files")
    assert "files.purge" not in catalog.jobs


def test_bad_executor_without_execute_and_class_instead_of_instance(plugins: Plugins) -> None:
    plugins.add(
        '(decl("files.purge", cron="0 3 * * *"), object())',
        '(decl("files.sweep", cron="0 3 * * *"), Executor)',
    )
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "bad-executor"), ("files.sweep", "bad-executor")]
    assert "IJobExecutor" in catalog.problems[0].message
    assert "Executor()" in catalog.problems[1].message
    assert catalog.jobs == {}


def test_missing_declaration_names_the_plugin(plugins: Plugins) -> None:
    path = plugins.add("(None, Executor())", '("files.purge", Executor())')
    catalog = plugins.catalog()
    assert codes(catalog) == [(None, "missing-declaration"), (None, "missing-declaration")]
    assert {problem.module for problem in catalog.problems} == {str(path)}
    assert "Executor" in catalog.problems[0].message
    assert catalog.problems[0].line().startswith(f"plugin {path} [missing-declaration]: ")


@pytest.mark.parametrize("name", ["Files.Purge", "purge", "files.", "files purge.x", "1files.x"])
def test_bad_name_states_the_rule_and_keeps_the_job(plugins: Plugins, name: str) -> None:
    plugins.add(f'job({name!r}, cron="0 3 * * *")')
    catalog = plugins.catalog()
    problem = only(catalog, "bad-name")
    assert problem.job == name
    assert "lower case" in problem.message
    assert "files.orphan-cleanup" in problem.message
    assert name in catalog.jobs


def test_no_trigger_for_an_enabled_job_only(plugins: Plugins) -> None:
    plugins.add('job("files.purge")', 'job("files.manual", enabled=False)')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "no-trigger")]
    manual = catalog.get("files.manual")
    assert manual.trigger.kind is None
    assert manual.schedule(datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_both_triggers_even_when_disabled(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *", interval=timedelta(hours=1), enabled=False)')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "both-triggers")]
    assert catalog.jobs == {}


@pytest.mark.parametrize("interval", ["timedelta(0)", "timedelta(minutes=-5)"])
def test_non_positive_interval(plugins: Plugins, interval: str) -> None:
    plugins.add(f'job("files.purge", interval={interval})')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "non-positive-interval")]
    assert catalog.jobs == {}


def test_an_interval_longer_than_the_schedule_can_count_in_is_refused(plugins: Plugins) -> None:
    plugins.add('job("files.purge", interval=timedelta(days=100_000_000))')
    plugins.add('job("files.ok", interval=timedelta(days=3650))')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "interval-too-long")]
    assert "3650d" in catalog.problems[0].message
    assert set(catalog.jobs) == {"files.ok"}


def test_cron_syntax_names_the_field_and_the_fix(plugins: Plugins) -> None:
    plugins.add('job("files.orphan-cleanup", cron="61 3 * * *")')
    catalog = plugins.catalog()
    problem = only(catalog, "cron-syntax")
    assert problem.line() == (
        "files.orphan-cleanup (module files) [cron-syntax]: cron expression '61 3 * * *': "
        "minute field '61': 61 is out of range 0-59; "
        'fix the expression in the declaration or in [jobs."files.orphan-cleanup"]'
    )
    assert catalog.jobs == {}


def test_cron_never_fires(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 0 30 2 *")')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "cron-never-fires")]
    assert "'0 0 30 2 *'" in catalog.problems[0].message
    assert catalog.jobs == {}


def test_unknown_timezone_for_cron_and_interval_jobs(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="0 3 * * *", timezone="Europe/Berln")',
        'job("files.sweep", interval=timedelta(hours=1), timezone="Mars/Olympus")',
    )
    catalog = plugins.catalog()
    assert codes(catalog) == [
        ("files.purge", "unknown-timezone"),
        ("files.sweep", "unknown-timezone"),
    ]
    assert "Europe/Berln" in catalog.problems[0].message
    assert "IANA" in catalog.problems[0].message
    assert catalog.jobs == {}


def test_cron_syntax_is_still_checked_when_the_zone_is_unknown(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 61 * * *", timezone="Europe/Berln")')
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "cron-syntax"), ("files.purge", "unknown-timezone")]


def test_unknown_override_suggests_the_closest_names(plugins: Plugins) -> None:
    plugins.add('job("files.orphan-cleanup", cron="0 3 * * *")')
    catalog = plugins.catalog(jobs={"files.orphan-cleanpu": {"enabled": False}})
    problem = only(catalog, "unknown-override")
    assert problem.job == "files.orphan-cleanpu"
    assert problem.module is None
    assert "'files.orphan-cleanup'" in problem.message
    assert '[jobs."files.orphan-cleanpu"]' in problem.message
    assert catalog.get("files.orphan-cleanup").enabled


def test_override_both_triggers(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *")')
    catalog = plugins.catalog(jobs={"files.purge": {"cron": "0 4 * * *", "interval": "1h"}})
    problem = only(catalog, "override-both-triggers")
    assert '[jobs."files.purge"]' in problem.message
    assert catalog.jobs == {}


def test_critical_disabled_by_override_or_declaration(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="0 3 * * *", critical=True)',
        'job("files.sweep", cron="0 3 * * *", critical=True, enabled=False)',
    )
    catalog = plugins.catalog(jobs={"files.purge": {"enabled": False}})
    assert codes(catalog) == [
        ("files.purge", "critical-disabled"),
        ("files.sweep", "critical-disabled"),
    ]
    assert "enabled = false" in catalog.problems[0].message
    assert "declaration" in catalog.problems[1].message
    assert not catalog.get("files.purge").enabled


def test_plugin_problems_become_catalog_problems(plugins: Plugins, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no database here')\n")
    plugins.files.append(broken)
    plugins.add('job("files.purge", cron="0 3 * * *")')
    catalog = plugins.catalog()
    problem = only(catalog, "plugin-import")
    assert (problem.job, problem.module) == (None, str(broken))
    assert "RuntimeError: no database here" in problem.message
    assert problem.line().startswith(f"plugin {broken} [plugin-import]: ")
    assert list(catalog.jobs) == ["files.purge"]
    assert str(plugins.files[1]) in catalog.plugins


def test_every_problem_is_listed_together(plugins: Plugins, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import jobhost_no_such_dependency\n")
    plugins.files.append(broken)
    plugins.add(
        'job("files.orphan-cleanup", cron="0 61 * * *")',
        'job("files.purge", cron="0 3 * * *", timezone="Europe/Berln")',
        'job("files.ok", interval=timedelta(hours=6))',
        'job("files.critical", cron="0 3 * * *", critical=True)',
        name="files_plugin",
    )
    plugins.add(
        'job("files.ok", module="billing", cron="0 1 * * *")',
        'job("Billing.Invoices", module="billing", interval=timedelta(0))',
        '(decl("billing.close", module="billing"), None)',
        "(None, Executor())",
        name="billing_plugin",
    )
    catalog = plugins.catalog(
        jobs={
            "files.critical": {"enabled": False},
            "billing.closee": {"cron": "0 2 * * *"},
        }
    )
    assert codes(catalog) == [
        (None, "missing-declaration"),
        (None, "plugin-import"),
        ("Billing.Invoices", "bad-name"),
        ("Billing.Invoices", "non-positive-interval"),
        ("billing.close", "missing-executor"),
        ("billing.close", "no-trigger"),
        ("billing.closee", "unknown-override"),
        ("files.critical", "critical-disabled"),
        ("files.ok", "duplicate-name"),
        ("files.orphan-cleanup", "cron-syntax"),
        ("files.purge", "unknown-timezone"),
    ]
    assert not catalog.ok
    assert list(catalog.jobs) == ["files.critical", "files.ok"]
    assert "'billing.close'" in only(catalog, "unknown-override").message
    for problem in catalog.problems:
        assert "; " in problem.message, f"no fix in {problem.line()}"


def test_override_cron_replaces_a_declared_interval(plugins: Plugins) -> None:
    plugins.add('job("files.purge", interval=timedelta(hours=6))')
    catalog = plugins.catalog(
        jobs={"files.purge": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}}
    )
    assert catalog.ok, catalog.problems
    spec = catalog.get("files.purge")
    assert (spec.trigger.kind, spec.trigger.expression, spec.trigger.interval) == (
        "cron",
        "30 2 * * *",
        None,
    )
    assert spec.trigger.timezone == "Europe/Berlin"
    assert spec.trigger.source == "override"
    assert (spec.declared.kind, spec.declared.expression) == ("interval", "6h")
    assert spec.declared.source == "declaration"
    assert spec.override is not None and spec.override.cron == "30 2 * * *"
    schedule = spec.schedule(datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert schedule is not None
    assert schedule.next_after(datetime(2026, 3, 28, 12, tzinfo=UTC)) == datetime(
        2026, 3, 29, 1, tzinfo=UTC
    )


def test_override_interval_replaces_a_declared_cron(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *")')
    catalog = plugins.catalog(jobs={"files.purge": {"interval": "90m"}})
    spec = catalog.get("files.purge")
    assert (spec.trigger.kind, spec.trigger.expression) == ("interval", "1h30m")
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    schedule = spec.schedule(anchor)
    assert schedule is not None
    assert schedule.next_after(anchor) == anchor + timedelta(minutes=90)


def test_override_enables_a_job_declared_disabled(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *", enabled=False)')
    catalog = plugins.catalog(jobs={"files.purge": {"enabled": True}})
    assert catalog.ok
    assert catalog.get("files.purge").enabled
    assert not catalog.get("files.purge").declaration.enabled


def test_override_problems_name_the_override_section(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 3 * * *")')
    catalog = plugins.catalog(
        jobs={"files.purge": {"cron": "0 0 31 4 *", "timezone": "Europe/Berln"}}
    )
    assert codes(catalog) == [
        ("files.purge", "cron-never-fires"),
        ("files.purge", "unknown-timezone"),
    ]
    for problem in catalog.problems:
        assert '[jobs."files.purge"]' in problem.message
    assert catalog.jobs == {}


def test_a_broken_declaration_is_reported_even_when_an_override_replaces_it(
    plugins: Plugins,
) -> None:
    plugins.add('job("files.purge", cron="0 61 * * *")')
    catalog = plugins.catalog(jobs={"files.purge": {"cron": "0 3 * * *"}})
    assert codes(catalog) == [("files.purge", "cron-syntax")]
    # The effective trigger is sound, so the job is still described by the catalog.
    assert catalog.get("files.purge").trigger.expression == "0 3 * * *"


def test_a_problem_shared_by_declared_and_effective_trigger_is_listed_once(
    plugins: Plugins,
) -> None:
    plugins.add('job("files.purge", cron="0 61 * * *")')
    catalog = plugins.catalog(jobs={"files.purge": {"timezone": "Europe/Berlin"}})
    assert codes(catalog) == [("files.purge", "cron-syntax")]


def test_config_is_the_read_only_module_section(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="0 3 * * *")',
        'job("files.sweep", cron="0 3 * * *", configuration_source="storage")',
        'job("http.ping", module="http", cron="0 3 * * *")',
    )
    catalog = plugins.catalog(
        modules={"files": {"root": "/srv", "keep": {"days": 7}}, "storage": {"bucket": "b"}}
    )
    config = catalog.get("files.purge").config
    assert dict(config) == {"root": "/srv", "keep": {"days": 7}}
    with pytest.raises(TypeError):
        config["root"] = "/tmp"  # type: ignore[index]
    with pytest.raises(TypeError):
        config["keep"]["days"] = 1
    assert dict(catalog.get("files.sweep").config) == {"bucket": "b"}
    assert dict(catalog.get("http.ping").config) == {}


def test_get_suggests_close_names(plugins: Plugins) -> None:
    plugins.add(
        'job("files.orphan-cleanup", cron="0 3 * * *")', 'job("files.purge", cron="0 3 * * *")'
    )
    catalog = plugins.catalog()
    with pytest.raises(UnknownJobError) as raised:
        catalog.get("files.orphan-clean")
    assert raised.value.suggestions == ["files.orphan-cleanup"]
    assert raised.value.exit_code == 2


def test_no_plugins_at_all_is_an_empty_clean_catalog() -> None:
    catalog = build_catalog(Settings(), environ={"JOBHOST_LOAD_PLUGINS": ""})
    assert catalog.ok
    assert catalog.jobs == {}


def test_problem_line_without_module() -> None:
    problem = Problem("files.x", None, "unknown-override", "fix it")
    assert problem.line() == "files.x [unknown-override]: fix it"
