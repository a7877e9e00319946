"""The dashboard in a real browser (headless Chromium) against a running ``jobhost run``.

One host serves every test of this module: the overview lists the jobs and a filter narrows
them; the timeline shows a failed run in its colour at its time; a person signed in with an
operator token triggers a run that then appears; an action without a token is refused. Each
test saves screenshots of the pages it saw in its own output folder.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.cli.operator_support import Operator, now
from tests.http_get import get
from tests.ports import free_port
from tests.process.conftest import HostProcess
from tests.waiting import wait_for, wait_for_value
from tests.web.browser import sign_in, waiting

pytestmark = pytest.mark.slow

TOKEN = "alice-0123456789-token"
JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.invoices", "interval": "6h"},
    {"name": "sample.reports", "interval": "12h"},
]
FAILED_RGB = "rgb(198, 40, 40)"  # --failed in console.css
ERROR_LEVEL_RGB = "rgba(255, 110, 110, 1)"  # .runlog .l-error .lv in console.css
WARNING_LEVEL_RGB = "rgba(255, 183, 77, 1)"
HOSTILE_LINES = [
    ("INFO", "<img src=x onerror=\"document.title='pwned'\"> copying"),
    ("WARNING", "<script>document.title='pwned'</script> slow"),
    ("ERROR", "Traceback (most recent call last):\nOSError: <b>disk full</b> & gone"),
]


class Site:
    def __init__(self, base: str, operator: Operator, failed_at: str, failed_run: str) -> None:
        self.base = base
        self.operator = operator
        self.failed_at = failed_at
        self.failed_run = failed_run


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("dashboard")
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
        config.write(f'[operator_tokens]\nalice = "{TOKEN}"\n')
    operator.sync()
    occurrence = now().replace(microsecond=0) - timedelta(hours=6)
    failed_run = operator.add_run(
        "sample.nightly",
        "failed",
        started=occurrence + timedelta(seconds=1),
        occurrence=occurrence,
        error="disk full on /var/data",
    )
    _add_lines(operator, failed_run, HOSTILE_LINES, start=1)
    env = operator.env(JOBHOST_HOST_ID="web-1")
    host = HostProcess("web-1", operator.config, directory / "host.log", env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base + "/healthz"), 60, "the host's HTTP server")
        yield Site(base, operator, occurrence.isoformat(), failed_run)
    finally:
        host.stop()
        operator.close()


def test_the_overview_lists_the_jobs_and_a_filter_narrows_them(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/")
    rows = _job_rows(browser)
    assert rows == ["sample.invoices", "sample.nightly", "sample.reports"]
    assert "3 of 3 jobs" in browser.find_element(By.ID, "matched").text
    assert "failing 1" in browser.find_element(By.ID, "summary").text
    browser.save_screenshot(str(tmp_path / "overview.png"))

    browser.find_element(By.ID, "search").send_keys("invoice")
    browser.find_element(By.ID, "apply").click()
    waiting(browser, 10).until(lambda b: len(_job_rows(b)) == 1)
    assert _job_rows(browser) == ["sample.invoices"]
    assert "1 of 3 jobs" in browser.find_element(By.ID, "matched").text

    browser.get(site.base + "/")
    Select(browser.find_element(By.ID, "state")).select_by_value("failing")
    browser.find_element(By.ID, "apply").click()
    waiting(browser, 10).until(lambda b: len(_job_rows(b)) == 1)
    assert _job_rows(browser) == ["sample.nightly"]
    browser.save_screenshot(str(tmp_path / "overview-failing.png"))


def test_the_timeline_shows_a_failed_run_in_its_colour_at_its_time(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/jobs/sample.nightly")
    (mark,) = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.mark[data-outcome=failed]")
    assert mark.value_of_css_property("fill") == FAILED_RGB
    assert mark.get_attribute("data-at") == site.failed_at
    # Six hours before the end of a 24-hour window: three quarters of the way along.
    assert abs(float(mark.get_attribute("data-x") or "0") - 75.0) < 0.5
    assert "disk full on /var/data" in mark.find_element(By.TAG_NAME, "title").get_attribute(
        "textContent"
    )
    assert "disk full on /var/data" in browser.find_element(By.ID, "errors").text
    fires = browser.find_elements(By.CSS_SELECTOR, "#fires tbody tr")
    assert len(fires) == 10 and "03:00:00 CE" in fires[0].text
    browser.save_screenshot(str(tmp_path / "job.png"))

    browser.find_element(By.ID, "range-7d").click()
    waiting(browser, 10).until(lambda b: "7 days" in b.find_element(By.TAG_NAME, "h2").text)
    (mark,) = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.mark[data-outcome=failed]")
    assert abs(float(mark.get_attribute("data-x") or "0") - (100 - 6 / 168 * 100)) < 0.5
    mark.find_element(By.XPATH, "..").click()
    waiting(browser, 10).until(lambda b: "/runs/" in b.current_url)
    assert browser.find_element(By.ID, "run-outcome").text == "failed"
    assert "disk full on /var/data" in browser.find_element(By.ID, "run-error").text
    browser.save_screenshot(str(tmp_path / "run.png"))
    browser.get(site.base + "/hosts")
    assert "web-1" in browser.find_element(By.ID, "hosts").text
    browser.save_screenshot(str(tmp_path / "hosts.png"))


def test_a_signed_in_trigger_produces_a_run_that_appears(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    sign_in(browser, site.base, TOKEN)
    assert browser.find_element(By.ID, "signed-in-as").text == "alice"

    browser.get(site.base + "/jobs/sample.invoices")
    browser.save_screenshot(str(tmp_path / "job-signed-in.png"))
    browser.find_element(By.ID, "trigger-reason").send_keys("INC-42: rerun after the fix")
    browser.find_element(By.ID, "trigger").click()
    # Asked once more, with the reason to check; nothing is queued until it is confirmed.
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "confirm-form"))
    assert browser.find_element(By.ID, "confirm-job").text == "sample.invoices"
    reason = browser.find_element(By.ID, "confirm-reason")
    assert reason.get_attribute("value") == "INC-42: rerun after the fix"
    assert browser.find_element(By.CSS_SELECTOR, "label[for=confirm-reason]").text
    assert [r for r in site.operator.requests() if r.job_name == "sample.invoices"] == []
    browser.save_screenshot(str(tmp_path / "trigger-confirm.png"))
    browser.find_element(By.ID, "confirm-trigger").click()
    # The answer leads to the run the host started, which the page follows to its end.
    waiting(browser, 30).until(lambda b: "/runs/" in b.current_url)
    waiting(browser, 30).until(lambda b: b.find_element(By.ID, "run-outcome").text == "succeeded")
    assert "INC-42: rerun after the fix" in browser.find_element(By.ID, "run-facts").text
    browser.save_screenshot(str(tmp_path / "triggered-run.png"))

    def manual_run_shown() -> bool:
        browser.get(site.base + "/jobs/sample.invoices")
        rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr[data-run]")
        return any("manual" in row.text and "succeeded" in row.text for row in rows)

    wait_for(manual_run_shown, 30, "the triggered run on the job page")
    assert (
        "alice trigger: “INC-42: rerun after the fix”" in browser.find_element(By.ID, "audit").text
    )
    browser.save_screenshot(str(tmp_path / "job-triggered.png"))
    (run,) = [r for r in site.operator.runs("sample.invoices") if r.source == "manual"]
    assert (run.requested_by, run.reason) == ("alice", "INC-42: rerun after the fix")


def test_an_action_without_a_token_is_refused(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/jobs/sample.reports")
    assert browser.find_elements(By.ID, "trigger") == []
    # Post the form a signed-in page would, without being signed in.
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'post';"
        "f.action = '/jobs/sample.reports/trigger';"
        "for (const [k, v] of [['reason', 'sneaky'], ['csrf', 'guess']]) {"
        "  const i = document.createElement('input'); i.name = k; i.value = v;"
        "  f.appendChild(i); }"
        "document.body.appendChild(f); f.submit();"
    )
    waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "refused"))
    assert "sign in with an operator token" in browser.find_element(By.ID, "refused").text
    browser.save_screenshot(str(tmp_path / "refused.png"))
    assert [r for r in site.operator.runs("sample.reports") if r.source == "manual"] == []
    assert site.operator.requests() == [] or all(
        request.job_name != "sample.reports" for request in site.operator.requests()
    )
    # Over plain HTTP: no session is 403, and so is a cross-site post.
    assert _post(site.base + "/jobs/sample.reports/trigger", "reason=x&csrf=y") == 403
    assert _post(site.base + "/signin", f"token={TOKEN}", origin="https://evil.example") == 403


def test_the_run_page_shows_its_log_escaped_with_levels_coloured(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/jobs/sample.nightly")
    # The job page's recent errors lead to the run, where its log is.
    browser.find_element(By.CSS_SELECTOR, "#errors li a").click()
    waiting(browser, 10).until(lambda b: f"/runs/{site.failed_run}" in b.current_url)
    (log,) = browser.find_elements(By.ID, "run-log")
    shown = log.text
    for _level, message in HOSTILE_LINES:
        for part in message.splitlines():
            assert part in shown
    assert log.find_elements(By.TAG_NAME, "img") == []
    assert log.find_elements(By.TAG_NAME, "script") == []
    assert log.find_elements(By.TAG_NAME, "b") == []
    assert browser.title != "pwned"
    levels = {
        line.find_element(By.CLASS_NAME, "lv").text: line.find_element(
            By.CLASS_NAME, "lv"
        ).value_of_css_property("color")
        for line in log.find_elements(By.CSS_SELECTOR, "div[id^=line-]")
    }
    assert levels["ERROR"] == ERROR_LEVEL_RGB
    assert levels["WARNING"] == WARNING_LEVEL_RGB
    assert browser.find_elements(By.CSS_SELECTOR, "meta[http-equiv=refresh]") == []
    browser.save_screenshot(str(tmp_path / "run-log.png"))


def test_the_run_page_tails_a_running_runs_log(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    run_id = site.operator.add_run("sample.reports", "running", source="manual")
    _add_lines(site.operator, run_id, [("INFO", "first step")], start=1)
    browser.get(f"{site.base}/runs/{run_id}")
    assert "first step" in browser.find_element(By.ID, "run-log").text
    assert browser.find_elements(By.ID, "run-log-tail")
    _add_lines(site.operator, run_id, [("INFO", "second step")], start=2)
    waiting(browser, 15).until(lambda b: "second step" in b.find_element(By.ID, "run-log").text)
    browser.save_screenshot(str(tmp_path / "run-log-tail.png"))


def _add_lines(
    operator: Operator, run_id: str, lines: list[tuple[str, str]], *, start: int
) -> None:
    """Log lines of ``run_id`` as a host writes them, numbered from ``start``."""
    from jobhost.records import LogLine
    from tests.support import append_lines

    rows = [
        LogLine(
            run_id,
            start + index,
            int(now().timestamp() * 1e6),
            level,
            message,
            offset=index * 100,
            size=100,
        )
        for index, (level, message) in enumerate(lines)
    ]
    with operator.engine.begin() as connection:
        append_lines(connection, rows)


def _job_rows(browser: WebDriver) -> list[str]:
    # A filter reloads the table: rows read while it is being replaced are read again.
    return wait_for_value(lambda: _read_job_rows(browser), 2, "the jobs table to hold still")


def _read_job_rows(browser: WebDriver) -> list[str] | None:
    try:
        rows = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr[data-job]")
        return [row.get_attribute("data-job") or "" for row in rows]
    except StaleElementReferenceException:
        return None
    except WebDriverException as error:
        # Chromium's word for a row the reload removed between the find and the read.
        if "does not belong to the document" in str(error):
            return None
        raise


def _post(url: str, body: str, origin: str | None = None) -> int:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if origin is not None:
        headers["Origin"] = origin
    request = urllib.request.Request(url, body.encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code)


def _answers(url: str) -> bool:
    try:
        return get(url)[0] == 200 and json.loads(get(url)[2])["ok"] is True
    except OSError:
        return False
