"""Headless Chromium for the dashboard tests: Debian's ``chromium`` and ``chromium-driver``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

__all__ = ["chromium"]

_ARGUMENTS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (its own profile directory), quit and removed afterwards."""
    binary = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.fail(
            "the dashboard tests need Debian's chromium and chromium-driver: "
            "apt-get install -y chromium chromium-driver (.ci/run does this)"
        )
    profile = tempfile.mkdtemp(prefix="jobhost-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (*_ARGUMENTS, f"--user-data-dir={profile}"):
        options.add_argument(argument)
    browser = webdriver.Chrome(options=options, service=Service(driver))
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)
