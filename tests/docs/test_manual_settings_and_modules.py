"""The manual's pages are all there and linked; every setting (with its variable and default)
and every hook (with its exact signature) is documented; the settings example parses, and the
example module of writing-a-module.md loads and its tests pass."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jobhost_contracts import hooks as contract_hooks

from jobhost.catalog import build_catalog
from jobhost.config import RUNTIME_SECRET_PREFIX, Settings
from tests.docs.manual_support import (
    DOCS,
    PAGES,
    documented_default,
    fenced_blocks,
    manual,
    normalised,
    page,
    sections,
)


def hookspecs() -> dict[str, Any]:
    return {
        name: function
        for name, function in vars(contract_hooks).items()
        if name.startswith("jobhost_") and inspect.isfunction(function)
    }


def test_every_page_exists_and_the_index_links_them() -> None:
    for name in PAGES:
        assert (DOCS / name).is_file(), f"docs/operations/{name} is missing"
    for name in PAGES[1:]:
        assert f"]({name})" in page("README.md"), f"README.md does not link {name}"


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_variable_and_default(name: str) -> None:
    settings = sections(page("settings.md"), "###")
    assert name in settings, f"settings.md has no section `### {name}`"
    body = settings[name]
    assert f"`JOBHOST_{name.upper()}`" in body, f"{name}: JOBHOST_{name.upper()} not named"
    default = re.search(r"^- Default: `?([^`\n]+)`?$", body, flags=re.MULTILINE)
    assert default is not None, f"{name}: no `- Default:` line"
    assert default[1] == documented_default(name), f"{name}: the code's default differs"
    assert "- Allowed:" in body, f"{name}: no `- Allowed:` line"


def test_every_environment_variable_the_manual_names_is_real() -> None:
    known = {f"JOBHOST_{name.upper()}" for name in Settings.model_fields}
    known |= {"JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS"}
    named = set(re.findall(r"\bJOBHOST_[A-Z_]+\b", manual()))
    # Variables under the runtime secret prefix are secrets for runtime jobs, not settings.
    named = {name for name in named if not name.startswith(RUNTIME_SECRET_PREFIX)}
    # The manual's one example of a misspelt variable, which the host names with a warning.
    named.discard("JOBHOST_POLL_INTERVALL")
    assert named - known == set(), "the manual names variables the host does not read"


@pytest.mark.parametrize("name", sorted(hookspecs()))
def test_every_hook_is_documented_with_its_exact_signature(name: str) -> None:
    body = sections(page("writing-a-module.md"), "###").get(name)
    assert body is not None, f"writing-a-module.md has no section `### {name}`"
    signature = inspect.signature(hookspecs()[name])
    for parameter in signature.parameters.values():
        assert f"{parameter.name}: {parameter.annotation}" in normalised(body), parameter
    assert f"-> {signature.return_annotation}" in normalised(body)
    assert name in page("README.md") or name in page("writing-a-module.md")


def test_the_settings_example_and_module_tables_parse() -> None:
    import tomllib

    text = page("settings.md")
    example = text.split("A complete `jobhost.toml`:\n\n", 1)[1].split("\n\n## ", 1)[0]
    data = tomllib.loads("\n".join(line.removeprefix("    ") for line in example.splitlines()))
    Settings.model_validate({k: v for k, v in data.items() if k != "modules"})
    assert set(data["modules"]) == {"jobhost", "files", "http"}


@pytest.fixture
def example_module(tmp_path: Path) -> Path:
    """The files of writing-a-module.md, written out as a project."""
    blocks = [b for b in fenced_blocks(page("writing-a-module.md"), "python") if "# file: " in b]
    assert len(blocks) >= 2
    for block in blocks:
        first, _, body = block.partition("\n")
        target = tmp_path / first.removeprefix("# file: ").strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    (tmp_path / "jobhost_exports" / "__init__.py").write_text("")
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    return tmp_path


def test_the_example_module_loads_into_a_valid_catalog(
    example_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(example_module))
    settings = Settings.model_validate(
        {
            "plugins": ["jobhost_exports.plugin"],
            "modules": {"exports": {"batch_size": 10, "failures_file": str(example_module / "f")}},
        }
    )
    catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
    assert catalog.ok, [problem.line() for problem in catalog.problems]
    spec = catalog.get("exports.partner-orders")
    assert spec.enabled
    assert [sink.name for sink in catalog.audit_sinks] == ["exports-failures-file"]
    sys.modules.pop("jobhost_exports.plugin", None)
    sys.modules.pop("jobhost_exports", None)


def test_the_example_module_tests_pass(example_module: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env["PYTHONPATH"] = str(example_module)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=example_module,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
