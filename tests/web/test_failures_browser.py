"""The Failures page and a job's history in a real browser (headless Chromium): search by error
text through the form, a row leads to its run, the chart draws failures in their colour, the
history's outcome filter and pager; a new failure joins the open page without a reload.
Screenshots go to the test's output folder (the manual's
dashboard-failures.png and dashboard-history.png come from there)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from jobhost.store import Store
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.console.pages import Console
from tests.cli.operator_support import Operator, now
from tests.web.browser import waiting

pytestmark = pytest.mark.slow

FAILED_RGB = "rgb(198, 40, 40)"  # --failed in console.css


class Site:
    def __init__(self, base: str, ids: dict[str, str], operator: Operator) -> None:
        self.base = base
        self.ids = ids
        self.operator = operator


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("failures")
    operator = Operator(f"sqlite:///{directory}/store.db", directory)
    operator.configure(
        [
            {"name": "sample.invoices", "interval": "15m"},
            {"name": "sample.exports", "interval": "1h"},
            {"name": "sample.cleanup", "interval": "30m"},
        ]
    )
    operator.sync()
    t = now()
    ids: dict[str, str] = {}
    for index in range(40):
        at = t - timedelta(minutes=15 * index + 3)
        failing = index < 3 or index % 7 == 0
        ids[f"invoices-{index}"] = operator.add_run(
            "sample.invoices",
            "failed" if failing else "succeeded",
            started=at,
            error="payments answered HTTP 503 Service Unavailable" if failing else None,
        )
    ids["export"] = operator.add_run(
        "sample.exports", "timed_out", started=t - timedelta(hours=2), error="took over 10m"
    )
    operator.add_run("sample.exports", "succeeded", started=t - timedelta(hours=1))
    ids["cleanup"] = operator.add_run(
        "sample.cleanup", "abandoned", started=t - timedelta(hours=5), error="its host stopped"
    )
    settings, catalog = operator.settings, operator.catalog()
    console = Console(settings, catalog, Store(operator.engine), allow_actions=False)
    app = create_app(
        store_endpoints(settings, catalog, Store(operator.engine)), pages=console.routes()
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield Site(f"http://127.0.0.1:{server.address[1]}", ids, operator)
    finally:
        server.stop()
        operator.close()


def _rows(browser: WebDriver, table: str) -> list[str]:
    return [
        row.get_attribute("data-run") or ""
        for row in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[data-run]")
    ]


def test_the_failures_page_searches_error_text_and_leads_to_the_run(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/")
    browser.find_element(By.ID, "nav-failures").click()
    waiting(browser, 10).until(lambda b: b.current_url.endswith("/failures"))
    rows = _rows(browser, "failures")
    # Three failed in a row just now, then every seventh of the older ones: one row of eight
    # (the same job and error), the newest shown; and two others.
    assert rows == [site.ids["invoices-0"], site.ids["export"], site.ids["cleanup"]]
    first = browser.find_element(By.CSS_SELECTOR, "#failures tbody tr")
    assert first.get_attribute("data-count") == "8"
    assert "\N{MULTIPLICATION SIGN} 8" in first.find_element(By.CSS_SELECTOR, "span.repeats").text
    assert first.find_element(By.CSS_SELECTOR, "td.streak").text == "3"
    assert "HTTP 503" in first.find_element(By.CSS_SELECTOR, "td.err").text
    outcome = first.find_element(By.CSS_SELECTOR, "span.o-failed")
    assert outcome.value_of_css_property("color") == "rgba(198, 40, 40, 1)"
    failed_bars = browser.find_elements(
        By.CSS_SELECTOR, "#installation-chart rect[data-outcome=failed]"
    )
    assert failed_bars and failed_bars[0].value_of_css_property("fill") == FAILED_RGB
    browser.save_screenshot(str(tmp_path / "failures.png"))

    search = browser.find_element(By.ID, "failure-q")
    search.send_keys("10M")
    browser.find_element(By.ID, "failure-search-button").click()
    waiting(browser, 10).until(lambda b: "q=10M" in b.current_url)
    assert _rows(browser, "failures") == [site.ids["export"]]
    browser.save_screenshot(str(tmp_path / "failures-search.png"))

    browser.find_element(By.CSS_SELECTOR, "#failures tbody tr td a").click()
    waiting(browser, 10).until(lambda b: "/runs/" in b.current_url)
    assert browser.current_url.endswith(f"/runs/{site.ids['export']}")
    assert browser.find_element(By.ID, "run-outcome").text == "timed_out"


def test_a_jobs_history_filters_by_outcome_and_pages(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/jobs/sample.invoices")
    assert _rows(browser, "runs") == [site.ids[f"invoices-{index}"] for index in range(25)]
    bars = browser.find_elements(By.CSS_SELECTOR, "#job-chart g.bar")
    assert len(bars) == 24
    browser.find_element(By.ID, "outcome-failed").click()
    waiting(browser, 10).until(lambda b: "outcome=failed" in b.current_url)
    failed = [index for index in range(40) if index < 3 or index % 7 == 0]
    assert _rows(browser, "runs") == [site.ids[f"invoices-{index}"] for index in failed]
    browser.save_screenshot(str(tmp_path / "history.png"))

    browser.get(site.base + "/jobs/sample.invoices")
    browser.find_element(By.ID, "history-older").click()
    waiting(browser, 10).until(lambda b: "page=2" in b.current_url)
    assert _rows(browser, "runs") == [site.ids[f"invoices-{index}"] for index in range(25, 40)]
    browser.find_element(By.ID, "range-1h").click()
    waiting(browser, 10).until(lambda b: "range=1h" in b.current_url)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#job-chart g.bar")) == 12
    assert "Runs in the last hour" in browser.find_element(By.ID, "runs-window").text


def test_a_new_failure_appears_without_a_reload_and_keeps_the_search_being_typed(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(site.base + "/failures")
    assert int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-live") or 0) > 0
    before = _rows(browser, "failures")
    # Set on this document only: a reload would lose it.
    browser.execute_script("window.jobhostOpened = true;")
    browser.find_element(By.ID, "failure-q").send_keys("vendor")
    fresh = site.operator.add_run(
        "sample.cleanup", "failed", started=now(), error="the vendor answered 502 Bad Gateway"
    )
    waiting(browser, 20).until(lambda b: _rows(b, "failures")[:1] == [fresh])
    assert browser.execute_script("return window.jobhostOpened === true;")
    assert _rows(browser, "failures") == [fresh, *before]
    first = browser.find_element(By.CSS_SELECTOR, "#failures tbody tr")
    assert "502 Bad Gateway" in first.find_element(By.CSS_SELECTOR, "td.err").text
    assert browser.find_element(By.ID, "failure-q").get_attribute("value") == "vendor"
    assert "updated" in browser.find_element(By.ID, "live-state").text
    browser.save_screenshot(str(tmp_path / "failures-live.png"))
