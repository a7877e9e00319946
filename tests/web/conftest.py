"""Fixtures the dashboard's browser tests share; each browser test module provides ``site``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.web.browser import chromium


@pytest.fixture
def browser(site: Any) -> Iterator[WebDriver]:
    """A fresh headless Chromium per test, started once the module's ``site`` serves."""
    with chromium() as made:
        yield made
