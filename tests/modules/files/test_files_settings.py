"""[modules.files]: what is refused (naming the field), and what the hook declares."""

from __future__ import annotations

import importlib.metadata
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from files_support import DictState, files_settings, make_context
from jobhost_contracts import BackgroundJobDeclaration, JobRegistration
from jobhost_files.outcome import NotConfigured
from jobhost_files.plugin import jobhost_jobs
from jobhost_files.settings import CleanupMode
from returns.result import Failure


def test_defaults(tree: dict[str, Any]) -> None:
    section = {key: tree[key] for key in ("root", "references_url", "references_query")}

    settings = files_settings(section)

    assert settings.root == Path(tree["root"]).resolve()
    assert settings.min_age == timedelta(hours=24)
    assert (settings.batch_size, settings.mode, settings.quarantine_days) == (
        200,
        CleanupMode.QUARANTINE,
        7,
    )
    assert (settings.dry_run, settings.cron, settings.timezone, settings.enabled) == (
        False,
        "17 3 * * *",
        "UTC",
        True,
    )


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ({"root": None}, ["root", "required"]),
        ({"root": "/no/such/dir"}, ["root", "/no/such/dir", "existing directory"]),
        ({"references_url": None}, ["references_url", "required"]),
        ({"references_url": "not a url"}, ["references_url", "not a url", "SQLAlchemy URL"]),
        ({"references_query": ""}, ["references_query", "required"]),
        ({"min_age": "soon"}, ["min_age", "soon", "duration"]),
        ({"min_age": -5}, ["min_age", "-5", "negative"]),
        ({"batch_size": 0}, ["batch_size", "0", "greater than 0"]),
        ({"batch_size": True}, ["batch_size", "True", "whole number"]),
        ({"mode": "shred"}, ["mode", "shred", "'quarantine' or 'delete'"]),
        ({"quarantine_days": 0}, ["quarantine_days", "0", "greater than 0"]),
        ({"dry_run": "yes"}, ["dry_run", "yes", "true or false"]),
        ({"enabled": 1}, ["enabled", "1", "true or false"]),
        ({"cron": ""}, ["cron", "non-empty"]),
        ({"retention": "7d"}, ["retention", "not a known setting", "quarantine_days"]),
    ],
)
def test_bad_settings_are_refused_naming_the_field(
    tree: dict[str, Any], change: dict[str, Any], fragments: list[str]
) -> None:
    section = {**tree, **change}
    section = {key: value for key, value in section.items() if value is not None}

    with pytest.raises(ValueError) as raised:
        jobhost_jobs(settings={"files": section})

    for fragment in fragments:
        assert fragment in str(raised.value)


def test_the_references_password_stays_out_of_errors_and_repr(tree: dict[str, Any]) -> None:
    url = "postgresql+psycopg://app:hunter2@db.internal/app"

    settings = files_settings({**tree, "references_url": url})
    with pytest.raises(ValueError) as raised:
        files_settings({**tree, "references_url": url, "references_query": ""})

    assert "hunter2" not in repr(settings)
    assert "app:***@db.internal" in repr(settings)
    assert "hunter2" not in str(raised.value)


def test_an_absent_section_declares_the_job_disabled() -> None:
    registrations = jobhost_jobs(settings=MappingProxyType({"http": {}}))

    [(declaration, executor)] = registrations
    assert isinstance(registrations[0], JobRegistration)
    assert declaration.name == "files.orphan-cleanup"
    assert declaration.module == "files"
    assert declaration.configuration_source == "files"
    assert not declaration.enabled
    assert declaration.cron == "17 3 * * *"
    # Run by hand anyway, it says what is missing instead of touching anything.
    result = executor.execute(make_context(DictState()))
    assert isinstance(result, Failure) and isinstance(result.failure(), NotConfigured)
    assert "[modules.files]" in str(result.failure())


def test_a_configured_section_declares_its_schedule(tree: dict[str, Any]) -> None:
    # The host hands sections over read-only; the hook must accept that form.
    section = MappingProxyType({**tree, "cron": "*/15 * * * *", "timezone": "Europe/Berlin"})

    [(declaration, _executor)] = jobhost_jobs(settings=MappingProxyType({"files": section}))

    assert isinstance(declaration, BackgroundJobDeclaration)
    assert (declaration.cron, declaration.timezone, declaration.enabled) == (
        "*/15 * * * *",
        "Europe/Berlin",
        True,
    )
    assert declaration.interval is None


def test_the_plugin_is_offered_through_the_jobhost_entry_point() -> None:
    offered = {
        point.name: point.value for point in importlib.metadata.entry_points(group="jobhost")
    }

    assert offered.get("files") == "jobhost_files.plugin"
