"""Headless Chromium for the dashboard tests: Debian's ``chromium`` and ``chromium-driver``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

__all__ = ["chromium", "sign_in", "waiting"]

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


def waiting(browser: WebDriver, seconds: float = 10) -> WebDriverWait[WebDriver]:
    """A wait that looks again when the element it read was replaced under it: a page that
    navigates, or a live refresh that swaps a section, makes a found element stale between the
    find and the read, which says nothing about the condition."""
    return WebDriverWait(browser, seconds, ignored_exceptions=(StaleElementReferenceException,))


def sign_in(browser: WebDriver, base: str, token: str) -> None:
    """Sign in through the dashboard's form, as a person would, and wait to be shown signed in."""
    browser.get(base + "/signin")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "signin").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "signed-in-as"))
