"""Retry, cancel and the module buttons in a real browser (headless Chromium) against a running
``jobhost run``: an operator cancels a running run through its host, retries a failed run and
watches the new attempt succeed, and pauses a whole module from the overview. Each test saves
screenshots of the pages it saw in its own output folder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.cli.operator_support import Operator, now
from tests.ports import free_port
from tests.process.conftest import HostProcess
from tests.waiting import wait_for
from tests.web.browser import chromium, sign_in, waiting
from tests.web.test_dashboard_browser import _answers

pytestmark = pytest.mark.slow

TOKEN = "carol-0123456789-token"
JOBS = [
    {"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 300},
    {"name": "sample.flaky", "cron": "0 3 * * *", "behaviour": "fail-once"},
    {
        "name": "sample.doomed",
        "cron": "0 3 * * *",
        "behaviour": "log",
        "lines": 4,
        "pause": 1,
        "raise": "the vendor went away",
    },
]


class Site:
    def __init__(self, base: str, operator: Operator) -> None:
        self.base = base
        self.operator = operator


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("run-actions")
    operator = Operator(f"sqlite:///{directory}/store.db", directory)
    port = free_port()
    operator.configure(
        JOBS,
        http_listen=f"127.0.0.1:{port}",
        poll_interval="1s",
        heartbeat_interval="1s",
        console_actions=True,
    )
    with operator.config.open("a") as config:
        config.write(f'[operator_tokens]\ncarol = "{TOKEN}"\n')
    operator.sync()
    host = HostProcess(
        "web-2", operator.config, directory / "host.log", operator.env(JOBHOST_HOST_ID="web-2")
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base + "/healthz"), 60, "the host's HTTP server")
        yield Site(base, operator)
    finally:
        host.stop()
        operator.close()


@pytest.fixture
def browser(site: Site) -> Iterator[WebDriver]:
    with chromium() as made:
        sign_in(made, site.base, TOKEN)
        yield made


def test_an_operator_cancels_a_running_run_through_its_host(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    queued = site.operator.jobhost("trigger", "sample.slow", "--no-wait", "--reason", "go")
    assert queued.returncode == 0, queued.stderr
    (run,) = wait_for(
        lambda: [r for r in site.operator.runs("sample.slow") if r.outcome == "running"],
        30,
        "the run to start on the host",
    )
    browser.get(f"{site.base}/runs/{run.id}")
    browser.save_screenshot(str(tmp_path / "run-running.png"))
    browser.find_element(By.ID, "cancel-link").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "cancel-form"))
    label = browser.find_element(By.CSS_SELECTOR, "label[for=cancel-reason]")
    assert label.text == "Why cancel this run"
    browser.find_element(By.ID, "cancel-reason").send_keys("stuck on the vendor, INC-91")
    browser.find_element(By.ID, "cancel").click()
    # Not confirmed: the browser keeps the form (the box is required) and nothing is asked.
    assert browser.find_elements(By.ID, "cancel-form")
    assert site.operator.runs("sample.slow")[0].cancel_requested_by is None
    browser.find_element(By.ID, "cancel-confirm").click()
    browser.save_screenshot(str(tmp_path / "run-cancel.png"))
    browser.find_element(By.ID, "cancel").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "notice"))
    assert "cancel asked" in browser.find_element(By.ID, "notice").text

    def outcome() -> str:
        browser.refresh()
        return browser.find_element(By.ID, "run-outcome").text

    wait_for(lambda: outcome() == "cancelled", 30, "the host to cancel the run")
    assert "by carol at" in browser.find_element(By.ID, "run-cancel").text
    browser.save_screenshot(str(tmp_path / "run-cancelled.png"))
    (ended,) = site.operator.runs("sample.slow")
    assert (ended.outcome, ended.host_id, ended.cancel_requested_by, ended.cancel_reason) == (
        "cancelled",
        "web-2",
        "carol",
        "stuck on the vendor, INC-91",
    )


def test_an_operator_retries_a_failed_run_and_sees_the_new_attempt_succeed(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    occurrence = now().replace(microsecond=0) - timedelta(hours=3)
    failed = site.operator.add_run(
        "sample.flaky", "failed", occurrence=occurrence, error="first attempt fails"
    )
    browser.get(f"{site.base}/runs/{failed}")
    label = browser.find_element(By.CSS_SELECTOR, "label[for=retry-reason]")
    assert label.text == "Why run this occurrence again (attempt 2)"
    browser.find_element(By.ID, "retry-reason").send_keys("vendor back")
    browser.find_element(By.ID, "retry-confirm").click()
    browser.save_screenshot(str(tmp_path / "run-retry.png"))
    browser.find_element(By.ID, "retry").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "notice"))
    assert "retry queued" in browser.find_element(By.ID, "notice").text
    assert f"/runs/{failed}" not in browser.current_url  # the new attempt's page

    def outcome() -> str:
        browser.refresh()
        return browser.find_element(By.ID, "run-outcome").text

    wait_for(lambda: outcome() == "succeeded", 30, "a host to run the retry")
    browser.save_screenshot(str(tmp_path / "run-retried.png"))
    first, second = site.operator.runs("sample.flaky")
    assert first.id == failed
    assert (second.attempt, second.occurrence, second.host_id, second.requested_by) == (
        2,
        occurrence,
        "web-2",
        "carol",
    )


def test_the_retry_form_appears_when_the_open_run_fails_and_keeps_the_typed_reason(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    queued = site.operator.jobhost("trigger", "sample.doomed", "--no-wait", "--reason", "go")
    assert queued.returncode == 0, queued.stderr
    (run,) = wait_for(
        lambda: [r for r in site.operator.runs("sample.doomed") if r.outcome == "running"],
        30,
        "the run to start on the host",
    )
    browser.get(f"{site.base}/runs/{run.id}")
    assert browser.find_elements(By.ID, "retry-form") == []
    # Set on this document only: a reload would lose it.
    browser.execute_script("window.jobhostOpened = true;")
    waiting(browser, 30).until(lambda b: b.find_elements(By.ID, "retry-form"))
    assert browser.execute_script("return window.jobhostOpened === true;")
    assert browser.find_element(By.ID, "run-outcome").text == "failed"
    assert "the vendor went away" in browser.find_element(By.ID, "run-error").text
    # The form's section is not live: a refresh never replaces what is being typed there.
    section = browser.find_element(By.ID, "run-actions")
    assert section.get_attribute("data-live") is None
    browser.find_element(By.ID, "retry-reason").send_keys("vendor back")
    browser.save_screenshot(str(tmp_path / "run-failed-live.png"))
    assert browser.find_element(By.ID, "retry-reason").get_attribute("value") == "vendor back"
    browser.find_element(By.ID, "retry-confirm").click()
    browser.find_element(By.ID, "retry").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "notice"))
    assert "retry queued" in browser.find_element(By.ID, "notice").text
    first, second = site.operator.runs("sample.doomed")[:2]
    assert (first.id, second.attempt, second.reason) == (run.id, 2, "vendor back")


def test_an_operator_pauses_and_resumes_a_module_from_the_overview(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/")
    assert browser.find_elements(By.ID, "bulk-pause") == []
    Select(browser.find_element(By.ID, "module")).select_by_value("sample")
    browser.find_element(By.ID, "apply").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "bulk-pause"))
    browser.find_element(By.ID, "bulk-pause-reason").send_keys("vendor outage")
    browser.find_element(By.ID, "bulk-pause-confirm").click()
    browser.save_screenshot(str(tmp_path / "overview-bulk.png"))
    browser.find_element(By.ID, "bulk-pause").click()
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "bulk-notice"))
    assert "module paused" in browser.find_element(By.ID, "bulk-notice").text
    for job in ("sample.slow", "sample.flaky"):
        row = site.operator.schedule(job)
        assert row is not None and (row.paused, row.paused_by) == (True, "carol")
    browser.find_element(By.ID, "bulk-resume-reason").send_keys("vendor back")
    browser.find_element(By.ID, "bulk-resume-confirm").click()
    browser.find_element(By.ID, "bulk-resume").click()
    waiting(browser, 10).until(
        lambda b: "module resumed" in b.find_element(By.ID, "bulk-notice").text
    )
    row = site.operator.schedule("sample.slow")
    assert row is not None and not row.paused
