"""The catalog tests read settings from a clean environment and load plugin files they write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.catalog.plugin_files import Plugins


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings read JOBHOST_*; a developer's shell must not change what these tests see.
    for key in list(os.environ):
        if key.startswith("JOBHOST_"):
            monkeypatch.delenv(key)


@pytest.fixture
def plugins(tmp_path: Path) -> Plugins:
    """Plugin files written into this test's folder."""
    return Plugins(tmp_path)
