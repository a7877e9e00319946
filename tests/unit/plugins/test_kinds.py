"""Collecting job kinds: a second kind of one name, or something that is not a kind, is a
problem naming the plugin; the catalog carries the kinds and lists those problems."""

from __future__ import annotations

from pathlib import Path

from jobhost.catalog import build_catalog
from jobhost.config import Settings

_PLUGIN = """\
from jobhost_contracts import JobKind, hookimpl


@hookimpl
def jobhost_job_kinds(settings):
    return [
        JobKind(name="http", description="again", settings_schema={{}},
                validate=dict, factory=lambda name, settings: None),
        JobKind(name={name!r}, description="mine", settings_schema={{"type": "object"}},
                validate=dict, factory=lambda name, settings: None, module="mine"),
        "not a kind",
    ]
"""


def test_kinds_are_collected_and_clashes_are_problems(tmp_path: Path) -> None:
    plugin = tmp_path / "kinds_plugin.py"
    plugin.write_text(_PLUGIN.format(name="sms"))
    catalog = build_catalog(
        Settings(plugins=[str(plugin)]), environ={"JOBHOST_LOAD_PLUGINS": "http"}
    )
    assert sorted(catalog.kinds) == ["http", "sms"]
    assert catalog.kinds["http"].description.startswith("Call an HTTP endpoint")
    assert catalog.kinds["sms"].module == "mine"
    messages = [p.message for p in catalog.problems if p.code == "plugin-bad-result"]
    assert any("job kind 'http' is offered by plugin http already" in m for m in messages)
    assert any("item 2 is str, not a JobKind" in m for m in messages)
