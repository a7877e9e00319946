"""A job's daylight-saving policy: declared, overridden, validated, and in the schedule it makes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from jobhost_contracts import DstGap, DstRepeat
from pydantic import ValidationError

from jobhost.config import Settings
from tests.unit.catalog.test_validation import Plugins, codes, only


@pytest.fixture
def plugins(tmp_path: Path) -> Plugins:
    return Plugins(tmp_path)


SPRING = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
AUTUMN = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)


def test_the_declared_policy_reaches_the_schedule(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", cron="30 2 * * *", timezone="Europe/Berlin", '
        "dst_gap=DstGap.SKIP, dst_repeat=DstRepeat.BOTH)"
    )
    plugins.files[0].write_text(
        plugins.files[0]
        .read_text()
        .replace(
            "from jobhost_contracts import ", "from jobhost_contracts import DstGap, DstRepeat, "
        )
    )
    catalog = plugins.catalog()
    assert catalog.ok, catalog.problems
    spec = catalog.get("files.purge")
    assert (spec.trigger.dst_gap, spec.trigger.dst_repeat) == (DstGap.SKIP, DstRepeat.BOTH)
    assert spec.trigger.source == "declaration"
    assert spec.trigger.describe() == (
        "cron '30 2 * * *' (Europe/Berlin; dst_gap=skip, dst_repeat=both)"
    )
    schedule = spec.schedule(SPRING)
    assert schedule is not None
    # 29 March has no 02:30: skipped, not shifted to 03:00.
    assert schedule.next_after(SPRING) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)
    # 25 October has two: both run.
    assert schedule.iter_after(AUTUMN, 2) == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    ]


def test_an_override_sets_the_policy_and_is_the_source(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="30 2 * * *", timezone="Europe/Berlin")')
    catalog = plugins.catalog(jobs={"files.purge": {"dst_repeat": "second"}})
    assert catalog.ok, catalog.problems
    spec = catalog.get("files.purge")
    assert (spec.trigger.dst_gap, spec.trigger.dst_repeat) == (DstGap.SHIFT, DstRepeat.SECOND)
    assert spec.trigger.source == "override"
    assert spec.declared.dst_repeat is DstRepeat.ONCE
    schedule = spec.schedule(AUTUMN)
    assert schedule is not None
    assert schedule.next_after(AUTUMN) == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


def test_the_default_policy_keeps_debian_crons_rule(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="30 2 * * *", timezone="Europe/Berlin")')
    spec = plugins.catalog().get("files.purge")
    assert spec.trigger.dst_policy() is None
    assert spec.trigger.describe() == "cron '30 2 * * *' (Europe/Berlin)"
    schedule = spec.schedule(SPRING)
    assert schedule is not None
    assert schedule.next_after(SPRING) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("trigger", "kind"),
    [('cron="*/15 * * * *"', "wildcard job"), ("interval=timedelta(hours=1)", "interval")],
)
def test_an_override_policy_on_a_job_it_cannot_affect_is_a_problem(
    plugins: Plugins, trigger: str, kind: str
) -> None:
    plugins.add(f'job("files.purge", {trigger})')
    catalog = plugins.catalog(jobs={"files.purge": {"dst_gap": "skip"}})
    problem = only(catalog, "dst-policy-unused")
    assert problem.job == "files.purge"
    assert "dst_gap = 'skip' has no effect" in problem.message
    assert kind in problem.message
    assert 'remove it from [jobs."files.purge"]' in problem.message
    assert not catalog.ok


def test_a_declared_policy_on_a_wildcard_job_names_the_declaration(plugins: Plugins) -> None:
    plugins.add('job("files.purge", cron="0 * * * *", dst_repeat=DstRepeat.FIRST)')
    plugins.files[0].write_text(
        plugins.files[0]
        .read_text()
        .replace("from jobhost_contracts import ", "from jobhost_contracts import DstRepeat, ")
    )
    catalog = plugins.catalog()
    assert codes(catalog) == [("files.purge", "dst-policy-unused")]
    assert "remove it from the declaration" in catalog.problems[0].message


def test_an_unknown_policy_value_is_refused_with_the_choices() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(jobs={"files.purge": {"dst_gap": "later"}})
    text = str(caught.value)
    assert "dst_gap" in text and "'shift'" in text and "'skip'" in text


def test_a_declaration_refuses_a_policy_of_the_wrong_type() -> None:
    from jobhost_contracts import BackgroundJobDeclaration

    with pytest.raises(TypeError, match="dst_repeat must be DstRepeat"):
        BackgroundJobDeclaration(name="files.purge", module="files", dst_repeat="both")  # type: ignore[arg-type]
