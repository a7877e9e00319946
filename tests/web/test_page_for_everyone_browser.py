"""The dashboard on a phone and for everyone, in a real browser (headless Chromium): at 390 px
wide no page scrolls sideways (wide tables scroll in their own box); every form field has a
label; every visible text meets 4.5:1 contrast against the background it is drawn on, in the
light scheme and in the dark one (``prefers-color-scheme: dark``, emulated); a skip link leads
to the main content. The overview, a job, a run, Failures, Changes and Backfills are scanned.
The scan is ``page_scan.js`` beside this file (axe-core's ``label`` and ``color-contrast``
rules, by hand). Signed in as an operator, so every form is on the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from jobhost.store import Store
from jobhost.store.backfills import create_backfill
from jobhost.store.runtime import ChangeEntry
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.console.pages import Console
from tests.cli.operator_support import Operator, now
from tests.web.browser import chromium, sign_in

pytestmark = pytest.mark.slow

TOKEN = "dana-0123456789-token"
SCAN = (Path(__file__).parent / "page_scan.js").read_text()
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": False}
WIDTH = """
const edge = document.documentElement.clientWidth;
const over = [...document.body.querySelectorAll("*")]
  .filter((e) => e.getBoundingClientRect().right > edge + 0.5)
  .filter((e) => !e.parentElement.closest("table"))
  .map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + "." + e.className);
return [document.documentElement.scrollWidth, window.innerWidth, over.slice(0, 8)];
"""
"""The page's width, the window's, and the first elements that stick out (for a failure)."""
OUTCOMES = ["failed", "timed_out", "missed", "skipped", "abandoned", "cancelled", "succeeded"]


class Site:
    def __init__(self, base: str, failed_run: str) -> None:
        self.base = base
        self.failed_run = failed_run

    def pages(self) -> dict[str, str]:
        return {
            "overview": "/",
            "job": "/jobs/sample.nightly-reconciliation-of-invoices",
            "run": f"/runs/{self.failed_run}",
            "failures": "/failures",
            "changes": "/changes",
            "backfills": "/backfills",
        }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("everyone")
    operator = Operator(f"sqlite:///{directory}/store.db", directory)
    name = "sample.nightly-reconciliation-of-invoices"
    operator.configure(
        [
            {"name": name, "cron": "0 3 * * *", "timezone": "Europe/Berlin", "critical": True},
            {"name": "sample.exports", "interval": "1h"},
            {"name": "sample.cleanup", "interval": "30m"},
        ],
        console_actions=True,
    )
    with operator.config.open("a") as config:
        config.write(f'[operator_tokens]\ndana = "{TOKEN}"\n')
    operator.sync()
    t = now().replace(microsecond=0)
    # Every outcome, so each one's colour is on the page to be measured.
    for index, outcome in enumerate(OUTCOMES):
        at = t - timedelta(hours=index + 1)
        operator.add_run(
            name,
            outcome,
            started=at,
            occurrence=at,
            error=None
            if outcome in {"succeeded", "missed", "skipped"}
            else f"{outcome}: the payments service answered HTTP 503 for a very long request path"
            "/v1/invoices/reconciliation/2026-12-03/batch-000000000000000000000000000001",
        )
    failed_run = operator.add_run(
        name, "failed", started=t - timedelta(minutes=5), error="disk full on /var/data"
    )
    operator.add_run("sample.exports", "running", source="manual")
    with operator.engine.begin() as connection:
        ChangeEntry("dana", "INC-7: the disk is full", t).log(
            connection, "pause", "sample.cleanup", {"paused": False}, {"paused": True}
        )
        create_backfill(
            connection,
            job=name,
            start=t - timedelta(days=3),
            end=t - timedelta(days=1),
            mode="all",
            reason="replay after the fix",
            actor="dana",
            concurrency=1,
            occurrences=[t - timedelta(days=2)],
            now=t,
        )
    settings, catalog = operator.settings, operator.catalog()
    console = Console(settings, catalog, Store(operator.engine), allow_actions=True)
    app = create_app(
        store_endpoints(settings, catalog, Store(operator.engine)), pages=console.routes()
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        yield Site(f"http://127.0.0.1:{server.address[1]}", failed_run)
    finally:
        server.stop()
        operator.close()


@pytest.fixture
def browser(site: Site) -> Iterator[WebDriver]:
    with chromium() as made:
        sign_in(made, site.base, TOKEN)
        yield made


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_fits_a_phone_labels_its_fields_and_reads_at_4_5_to_1(
    site: Site, browser: WebDriver, tmp_path: Path, scheme: str
) -> None:
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
    )
    found: dict[str, Any] = {}
    for page, path in site.pages().items():
        browser.get(site.base + path)
        width = browser.execute_script(WIDTH)
        scan = browser.execute_script(SCAN)
        browser.save_screenshot(str(tmp_path / f"{page}-{scheme}.png"))
        if page == "job":
            # The failing job's replay form is among the fields scanned.
            assert browser.find_elements(By.ID, "replay-streak-form")
        found[page] = {
            "width": width,
            "checked": scan["checked"],
            "unlabelled": scan["unlabelled"],
            "contrast": scan["contrast"],
        }
    # The figures, for the record and for a failure's reader.
    (tmp_path / f"scan-{scheme}.json").write_text(json.dumps(found, indent=2))
    print(scheme, {p: (f["width"], f["checked"], len(f["contrast"])) for p, f in found.items()})
    assert {page: f["width"][0] <= f["width"][1] for page, f in found.items()} == {
        page: True for page in found
    }, {page: f["width"] for page, f in found.items()}
    assert {page: f["unlabelled"] for page, f in found.items()} == {page: [] for page in found}
    assert {page: f["contrast"] for page, f in found.items()} == {page: [] for page in found}
    assert all(f["checked"] > 20 for f in found.values())


def test_a_skip_link_leads_to_the_main_content(site: Site, browser: WebDriver) -> None:
    browser.get(site.base + "/")
    skip = browser.find_element(By.CSS_SELECTOR, "a.skip")
    assert skip.get_attribute("href") == site.base + "/#main"
    # The first thing a keyboard reaches, and shown once it has the focus.
    browser.find_element(By.TAG_NAME, "body").send_keys("\t")
    assert browser.switch_to.active_element == skip
    assert skip.is_displayed() and skip.rect["width"] > 1
    skip.send_keys("\n")
    assert browser.current_url.endswith("#main")
    assert browser.find_element(By.ID, "main").tag_name == "main"
