"""The catalog tests read settings from a clean environment."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings read JOBHOST_*; a developer's shell must not change what these tests see.
    for key in list(os.environ):
        if key.startswith("JOBHOST_"):
            monkeypatch.delenv(key)
