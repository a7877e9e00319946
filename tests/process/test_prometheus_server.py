"""A real Prometheus server (Debian's binary) scrapes a real ``jobhost run`` whose job fails:
the rules in deploy/prometheus fire with the job's name, the gauges arrive, and every PromQL
expression of the rules and of the Grafana dashboard evaluates without error."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.cli.operator_support import Operator, now
from tests.ports import free_port
from tests.process.conftest import HostProcess
from tests.waiting import wait_for_value

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "jobhost-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "jobhost.json"
# What Grafana puts in place of its own variables before it sends a query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
_T = TypeVar("_T")


def rule_expressions() -> list[tuple[str, str]]:
    document = yaml.safe_load(RULES.read_text())
    return [
        (rule["alert"], rule["expr"]) for group in document["groups"] for rule in group["rules"]
    ]


def dashboard_expressions() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            expression = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expression = expression.replace(variable, value)
            found.append((f"{panel['title']} {target['refId']}", expression))
    return found


class PrometheusServer:
    """``prometheus`` on a loopback port with a temporary data directory."""

    def __init__(self, directory: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        assert binary is not None, "prometheus is not installed: `apt-get install prometheus`"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {"job_name": "jobhost", "static_configs": [{"targets": [target]}]}
                    ],
                }
            )
        )
        self._log = (directory / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def api(self, path: str, **query: str) -> Any:
        url = f"{self.base}/api/v1/{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            with error:
                if error.code == 503:
                    # Starting (its storage not open yet): it answers in plain text.
                    raise ConnectionError("Prometheus is not ready yet") from None
                return json.loads(error.read())

    def query(self, expression: str) -> Any:
        return self.api("query", query=expression)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


Scraped = tuple[PrometheusServer, HostProcess, Operator]


@pytest.fixture
def scraped_host(tmp_path: Path) -> Iterator[Scraped]:
    operator = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    port = free_port()
    operator.configure(
        [
            {"name": "billing.close-day", "cron": "* * * * * *", "behaviour": "fail"},
            {"name": "files.purge", "cron": "* * * * * *"},
            # Fires once a year: its failed night is written by the test.
            {"name": "billing.nightly", "cron": "0 3 1 1 *", "behaviour": "fail-once"},
        ],
        http_listen=f"127.0.0.1:{port}",
        poll_interval="1s",
        heartbeat_interval="1s",
        metrics_refresh="1s",
        dashboard_url="https://ops.example.com/jobhost",
    )
    host = HostProcess(
        "prom-1", operator.config, tmp_path / "host.log", operator.env(JOBHOST_HOST_ID="prom-1")
    )
    try:
        # Inside the try: a server that cannot start leaves no host process behind.
        server = PrometheusServer(tmp_path, f"127.0.0.1:{port}")
        try:
            yield server, host, operator
        finally:
            server.stop()
    finally:
        host.stop()
        operator.close()


@pytest.mark.slow
def test_prometheus_fires_the_run_failed_alert_for_the_failing_job(
    scraped_host: Scraped,
) -> None:
    server, host, _operator = scraped_host

    def failed_alert() -> dict[str, Any] | None:
        answer = _answer(server.api, "alerts")
        alerts = answer["data"]["alerts"] if answer else []
        return next(
            (
                alert
                for alert in alerts
                if alert["labels"]["alertname"] == "JobhostRunFailed"
                and alert["state"] in {"pending", "firing"}
            ),
            None,
        )

    alert = _within(60, failed_alert, "the JobhostRunFailed alert", host)
    assert alert["labels"]["exported_job"] == "billing.close-day"
    assert alert["labels"]["outcome"] == "failed"
    assert "jobhost history billing.close-day" in alert["annotations"]["description"]

    # The gauges reach Prometheus too: one live host, the failing job counted as failing.
    live = _within(30, lambda: _value(server, "max(jobhost_live_hosts)"), "live hosts", host)
    assert live == 1
    failing = _within(
        30,
        lambda: _value(server, 'max(jobhost_jobs{status="failing"}) > 0'),
        "a failing job in jobhost_jobs",
        host,
    )
    assert failing == 1
    assert _value(server, "max(jobhost_store_up)") == 1

    for name, expression in [*rule_expressions(), *dashboard_expressions()]:
        answer = server.query(expression)
        assert answer["status"] == "success", f"{name}: {expression}: {answer}"
    rules = server.api("rules")["data"]["groups"]
    assert all(rule["health"] == "ok" for group in rules for rule in group["rules"]), rules


@pytest.mark.slow
def test_a_night_that_failed_an_hour_ago_alerts_until_its_retry_succeeds(
    scraped_host: Scraped,
) -> None:
    server, host, operator = scraped_host
    operator.sync()
    night = now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    failed = operator.add_run(
        "billing.nightly", "failed", occurrence=night, started=night, error="connection refused"
    )

    def failing_alert() -> dict[str, Any] | None:
        return _alert(server, "JobhostJobFailing", "billing.nightly")

    # An hour after its one failure, the job still alerts, linking to its page and failures.
    alert = _within(45, failing_alert, "the JobhostJobFailing alert", host)
    assert alert["labels"]["critical"] == "false"
    assert alert["annotations"]["dashboard"] == (
        "https://ops.example.com/jobhost/jobs/billing.nightly"
    )
    assert alert["annotations"]["failures"] == (
        "https://ops.example.com/jobhost/failures?job=billing.nightly"
    )
    retried = operator.jobhost("retry", failed, "--reason", "after the fix")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    _within(
        30,
        lambda: True if failing_alert() is None else None,
        "the JobhostJobFailing alert to end after the retry",
        host,
    )


def _alert(server: PrometheusServer, name: str, job: str) -> dict[str, Any] | None:
    answer = _answer(server.api, "alerts")
    alerts = answer["data"]["alerts"] if answer else []
    return next(
        (
            alert
            for alert in alerts
            if alert["labels"]["alertname"] == name
            and alert["labels"].get("exported_job") == job
            and alert["state"] in {"pending", "firing"}
        ),
        None,
    )


def _answer(call: Callable[..., Any], *args: str) -> Any:
    try:
        return call(*args)
    except (urllib.error.URLError, ConnectionError):
        return None  # not listening, or not ready, yet


def _value(server: PrometheusServer, expression: str) -> float | None:
    answer = _answer(server.query, expression)
    if not answer or answer["status"] != "success" or not answer["data"]["result"]:
        return None
    return float(answer["data"]["result"][0]["value"][1])


def _within(seconds: float, probe: Callable[[], _T | None], what: str, host: HostProcess) -> _T:
    try:
        return wait_for_value(probe, seconds, what, every=0.25)
    except AssertionError as error:
        raise AssertionError(f"{error}; host log:\n{host.log()[-3000:]}") from None
