"""A job's effective declaration survives the store: written as text, read back equal."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from jobhost.catalog import JobSpec
from jobhost.catalog.stored import StoredExecutor, declaration_text, stored_spec
from jobhost.rules import catalog_version, desired_schedules
from tests.unit.catalog.plugin_files import Plugins

JOBS = (
    'job("files.purge", interval=timedelta(hours=6), description="Purge old files", '
    "critical=True, timeout=timedelta(minutes=10), misfire_grace=timedelta(seconds=90))",
    'job("files.night", cron="30 2 * * *", timezone="Europe/Berlin", '
    "dst_gap=DstGap.SKIP, dst_repeat=DstRepeat.BOTH, overlap=OverlapPolicy.ALLOW, "
    "max_concurrent=3, overdue_after=timedelta(hours=2), "
    "retry=RetryPolicy(max_attempts=4, backoff=timedelta(seconds=5), jitter=0.0))",
)
IMPORTS = "from jobhost_contracts import DstGap, DstRepeat, OverlapPolicy, RetryPolicy\n"


def _catalog(plugins: Plugins, **overrides: dict[str, object]) -> dict[str, JobSpec]:
    path = plugins.add(*JOBS)
    path.write_text(IMPORTS + path.read_text())
    catalog = plugins.catalog(jobs=dict(overrides))
    assert catalog.ok, catalog.problems
    return catalog.jobs


def _same(spec: JobSpec, back: JobSpec) -> None:
    assert isinstance(back.executor, StoredExecutor)
    assert dataclasses.replace(back, executor=spec.executor) == spec


def test_every_field_of_every_job_comes_back(tmp_path: Path) -> None:
    jobs = _catalog(Plugins(tmp_path))
    assert sorted(jobs) == ["files.night", "files.purge"]
    for spec in jobs.values():
        _same(spec, stored_spec(spec.name, spec.module, declaration_text(spec), spec.config))


def test_an_override_comes_back_with_what_it_changed(tmp_path: Path) -> None:
    jobs = _catalog(Plugins(tmp_path), **{"files.night": {"cron": "0 4 * * *", "dst_gap": "shift"}})
    spec = jobs["files.night"]
    back = stored_spec(spec.name, spec.module, declaration_text(spec), spec.config)
    _same(spec, back)
    assert back.trigger.source == "override"
    assert back.declared.expression == "30 2 * * *"


def test_a_changed_policy_or_description_is_a_new_catalog_version(tmp_path: Path) -> None:
    jobs = _catalog(Plugins(tmp_path))
    before = catalog_version(desired_schedules(jobs))
    purge = jobs["files.purge"]
    for change in (
        {"description": "Purge older files"},
        {"timeout": None},
        {"critical": False},
    ):
        changed = {
            **jobs,
            "files.purge": dataclasses.replace(
                purge, declaration=dataclasses.replace(purge.declaration, **change)
            ),
        }
        assert catalog_version(desired_schedules(changed)) != before, change
    assert catalog_version(desired_schedules(jobs)) == before


AWKWARD = (
    'job("text.zurich", interval=timedelta(hours=1), description="Zürich \\x7f \\t \\u2028 東京")',
    'job("text.tiny", interval=timedelta(hours=1), timeout=timedelta(microseconds=1), '
    "lease=timedelta(days=365), retry=RetryPolicy(max_attempts=2, jitter=1e-7))",
    'job("text.plain", cron="*/5 * * * *", description="a \\"quoted\\" \\\\ word")',
)


def test_the_text_is_byte_for_byte_what_the_standard_encoder_writes(tmp_path: Path) -> None:
    # The text is part of the catalog version: a store synced before must hold the same text.
    plugins = Plugins(tmp_path)
    path = plugins.add(*JOBS, *AWKWARD)
    path.write_text(IMPORTS + path.read_text())
    catalog = plugins.catalog(jobs={"files.night": {"cron": "0 4 * * *"}})
    assert catalog.ok, catalog.problems
    assert len(catalog.jobs) == 5
    for spec in catalog.jobs.values():
        text = declaration_text(spec)
        assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
