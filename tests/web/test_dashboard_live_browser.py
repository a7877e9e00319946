"""The dashboard's live refresh and time zone switch in a real browser (headless Chromium).

Against ``jobhost serve`` over a store the test changes: a change to the store appears on an
open page without a reload, and a paused page keeps what it shows while another browser's page
moves on; the zone picked in the header is applied to every time and remembered across page
loads; a running run's page follows its state, units and log to its end. Each test saves
screenshots of the pages it saw in its own output folder.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from sqlalchemy import update

from jobhost.store.schema import runs
from tests.cli.operator_support import Operator, now
from tests.http_get import get
from tests.ports import free_port
from tests.waiting import wait_for
from tests.web.browser import chromium, waiting
from tests.web.test_dashboard_browser import _add_lines

pytestmark = pytest.mark.slow

JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.reports", "interval": "12h"},
]


class Site:
    def __init__(self, base: str, operator: Operator) -> None:
        self.base = base
        self.operator = operator


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("live")
    operator = Operator(f"sqlite:///{directory}/store.db", directory)
    operator.configure(JOBS)
    operator.sync()
    operator.add_run("sample.nightly", "succeeded", started=now() - timedelta(minutes=5))
    operator.add_run("sample.reports", "succeeded", started=now() - timedelta(minutes=7))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "jobhost", "--config", str(operator.config), "serve"]
    child = subprocess.Popen(
        [*command, "--listen", f"127.0.0.1:{port}"],
        env=operator.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _answers(base + "/readyz"), 60, "jobhost serve")
        yield Site(base, operator)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=15)
        operator.close()


def test_a_change_appears_without_a_reload_and_pause_holds_the_page(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/")
    assert _status(browser, "sample.reports") == "ok"
    assert browser.find_element(By.ID, "live-toggle").text == "Pause live"
    browser.execute_script("window.stillTheSamePage = 'yes';")
    site.operator.add_run("sample.reports", "failed", error="upstream 503")
    _until(browser, lambda b: _status(b, "sample.reports") == "failing")
    assert browser.execute_script("return window.stillTheSamePage;") == "yes"
    assert "updated" in browser.find_element(By.ID, "live-state").text
    browser.save_screenshot(str(tmp_path / "overview-live.png"))

    browser.find_element(By.ID, "live-toggle").click()
    _until(browser, lambda b: b.find_element(By.ID, "live-toggle").text == "Resume live")
    polls = _polls(browser)
    with chromium() as other:
        # Another browser's page stays live: once it has shown the change and asked once
        # more, the paused page would have shown it too had it been asking.
        other.get(site.base + "/")
        site.operator.add_run("sample.nightly", "failed", error="disk full")
        _until(other, lambda b: _status(b, "sample.nightly") == "failing")
        shown_at = _polls(other)
        _until(other, lambda b: _polls(b) >= shown_at + 1)
    assert _status(browser, "sample.nightly") == "ok"
    assert _polls(browser) == polls
    assert "paused" in browser.find_element(By.ID, "live-state").text

    browser.find_element(By.ID, "live-toggle").click()
    _until(browser, lambda b: _status(b, "sample.nightly") == "failing")
    assert browser.execute_script("return window.stillTheSamePage;") == "yes"


def test_the_zone_picked_is_applied_to_every_time_and_remembered(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/jobs/sample.nightly")
    utc_fire = _fire(browser)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 0[12]:00:00Z", utc_fire), utc_fire
    assert _text(browser, "#fires th [data-zone-label]") == "UTC"
    # The job's own zone stays in its labelled column whatever is picked.
    assert "03:00:00 CE" in browser.find_element(By.CSS_SELECTOR, "#fires td").text

    Select(browser.find_element(By.ID, "zone")).select_by_value("job")
    _until(browser, lambda b: _fire(b).endswith(("03:00:00 CET", "03:00:00 CEST")))
    label = _text(browser, "#fires th [data-zone-label]")
    assert label == "the job's zone, Europe/Berlin"
    browser.save_screenshot(str(tmp_path / "job-zone.png"))

    # Remembered by this browser: the next page shows the same zone from the start.
    browser.get(site.base + "/")
    assert Select(browser.find_element(By.ID, "zone")).first_selected_option.text == (
        "each job's zone"
    )
    header = _text(browser, "#jobs th [data-zone-label]")
    assert header == "each job's own zone"
    nightly = _next_fire(browser, "sample.nightly")
    assert re.search(r"03:00:00 CES?T$", nightly.text), nightly.text
    reports = _next_fire(browser, "sample.reports")
    assert reports.text.endswith("Z"), reports.text  # a job without a zone of its own: UTC
    # A relative time carries its absolute time on hover.
    ago = _row(browser, "sample.reports").find_element(By.CSS_SELECTOR, "time.ago")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", ago.get_attribute("title") or "")

    # A run's log lines too, to the millisecond, in its job's zone.
    run_id = site.operator.add_run("sample.nightly", "succeeded", source="manual")
    _add_lines(site.operator, run_id, [("INFO", "copied")], start=1)
    browser.get(f"{site.base}/runs/{run_id}")
    stamp = browser.find_element(By.CSS_SELECTOR, "#line-1 time").text
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} CES?T", stamp), stamp

    Select(browser.find_element(By.ID, "zone")).select_by_value("utc")
    stamp = browser.find_element(By.CSS_SELECTOR, "#line-1 time").text
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp
    browser.get(site.base + "/")
    _until(browser, lambda b: _next_fire(b, "sample.nightly").text.endswith("Z"))
    browser.get(site.base + "/jobs/sample.nightly")
    assert _fire(browser) == utc_fire


def test_a_running_runs_page_follows_its_state_units_and_log_to_the_end(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    run_id = site.operator.add_run("sample.reports", "running", source="manual")
    _set_run(site.operator, run_id, units_total=40, units_succeeded=12, units_failed=1)
    _add_lines(site.operator, run_id, [("INFO", "unit 12 of 40")], start=1)
    browser.get(f"{site.base}/runs/{run_id}")
    units = browser.find_element(By.ID, "run-units").text
    assert "40 in all: 12 succeeded, 1 failed, 0 skipped as already done, 27 not started" in units
    assert browser.find_elements(By.ID, "run-log-tail")
    browser.execute_script("window.stillTheSamePage = 'yes';")

    _set_run(site.operator, run_id, units_succeeded=39)
    _add_lines(site.operator, run_id, [("INFO", "unit 40 of 40")], start=2)
    _until(browser, lambda b: "39 succeeded" in b.find_element(By.ID, "run-units").text)
    _until(browser, lambda b: "unit 40 of 40" in b.find_element(By.ID, "run-log").text)
    lines = browser.find_elements(By.CSS_SELECTOR, "#run-log div[data-seq]")
    assert [line.get_attribute("data-seq") for line in lines] == ["1", "2"]

    finished = now()
    _set_run(site.operator, run_id, outcome="succeeded", finished_at=finished)
    _until(browser, lambda b: b.find_element(By.ID, "run-outcome").text == "succeeded")
    _until(browser, lambda b: "stopped" in b.find_element(By.ID, "live-state").text)
    assert browser.find_elements(By.ID, "run-log-tail") == []
    assert browser.execute_script("return window.stillTheSamePage;") == "yes"
    browser.save_screenshot(str(tmp_path / "run-units.png"))


def _set_run(operator: Operator, run_id: str, **values: object) -> None:
    with operator.engine.begin() as connection:
        connection.execute(update(runs).where(runs.c.id == run_id).values(**values))


def _until(browser: WebDriver, condition: Callable[[WebDriver], object]) -> None:
    waiting(browser, 30).until(condition)


def _row(browser: WebDriver, job: str):  # type: ignore[no-untyped-def]
    return browser.find_element(By.CSS_SELECTOR, f"#jobs tr[data-job='{job}']")


def _next_fire(browser: WebDriver, job: str):  # type: ignore[no-untyped-def]
    return _row(browser, job).find_element(By.CSS_SELECTOR, "time[data-zone]")


def _status(browser: WebDriver, job: str) -> str:
    for _ in range(20):
        try:
            return _row(browser, job).get_attribute("data-status") or ""
        except StaleElementReferenceException:
            continue
    raise AssertionError("the jobs table kept changing while it was read")


def _text(browser: WebDriver, selector: str) -> str:
    """The text as written (headers are shown in capitals by the stylesheet)."""
    return str(browser.find_element(By.CSS_SELECTOR, selector).get_attribute("textContent"))


def _polls(browser: WebDriver) -> int:
    return int(browser.find_element(By.ID, "live-state").get_attribute("data-polls") or 0)


def _fire(browser: WebDriver) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, "#fires td:nth-child(2)").text)


def _answers(url: str) -> bool:
    try:
        return get(url)[0] == 200
    except OSError:
        return False
