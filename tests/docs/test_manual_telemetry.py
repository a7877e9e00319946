"""Every metric (by instrument and by Prometheus name), span attribute and outcome is in the
manual, and the alert rules and the Grafana dashboard name only what the host exports."""

from __future__ import annotations

import importlib
import json
import re
from functools import cache
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from jobhost.config import Settings
from jobhost.envelope.reporting import OUTCOMES, Telemetry
from jobhost.firing.host import HostStatus
from jobhost.operations.gauges import JobGauges, StoreFigures, register_gauges
from jobhost.web import prometheus_reader
from tests.docs.manual_support import (
    ROOT,
    fenced_blocks,
    page,
)

ENVELOPE = ROOT / "jobhost" / "envelope" / "envelope.py"
RULES = ROOT / "deploy" / "prometheus" / "jobhost-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "jobhost.json"


def instruments() -> list[Any]:
    """The instruments a Telemetry creates, read from the object itself."""
    telemetry = Telemetry(TracerProvider(), MeterProvider())
    found = [v for v in vars(telemetry).values() if hasattr(v, "name") and hasattr(v, "unit")]
    assert found, "Telemetry created no instruments"
    return found


@cache
def prometheus_exposition() -> str:
    """What ``/metrics`` shows once every instrument has recorded something."""
    reader, render = prometheus_reader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(TracerProvider(), meter_provider)
    telemetry.runs.add(1, {"job": "a.b", "outcome": "succeeded"})
    telemetry.duration.record(1.0, {"job": "a.b", "outcome": "succeeded"})
    telemetry.lag.record(1.0, {"job": "a.b"})
    telemetry.sink_failures.add(1, {"sink": "s", "job": "a.b"})
    telemetry.units.add(1, {"job": "a.b", "result": "succeeded"})
    telemetry.audit_dropped.add(1, {"sink": "s"})
    host = _GaugeHost()
    register_gauges(telemetry.meter, host, _Figures(host))
    try:
        return render().decode()
    finally:
        meter_provider.shutdown()


class _Figures(JobGauges):
    """The gauges over fixed figures: one overdue critical job failing twice in a row, one
    live host."""

    def figures(self) -> StoreFigures:
        return StoreFigures(
            live_hosts=1,
            by_status={"overdue": 1},
            overdue=[("a.b", True)],
            skew_seconds={"host-1": 0.1},
            failing=[("a.b", True, 2)],
        )


class _GaugeHost:
    host_id = "host-1"
    settings = Settings()
    catalog = None
    engine = None
    clock = None
    status = HostStatus(store_ok=True)


def prometheus_families() -> set[str]:
    return set(re.findall(r"^# TYPE (jobhost_\w+) ", prometheus_exposition(), flags=re.MULTILINE))


def prometheus_series_names() -> set[str]:
    return set(re.findall(r"^(jobhost_\w+)\{", prometheus_exposition(), flags=re.MULTILINE))


def span_attributes() -> set[str]:
    return set(re.findall(r'"(jobhost\.(?:job|run)\.[a-z_]+)"', ENVELOPE.read_text()))


@pytest.mark.parametrize("instrument", instruments(), ids=lambda i: str(i.name))
def test_every_metric_is_documented_with_its_unit(instrument: Any) -> None:
    text = page("observability.md")
    row = next((line for line in text.splitlines() if f"| `{instrument.name}` |" in line), None)
    assert row is not None, f"{instrument.name} has no row in observability.md"
    unit = "seconds" if instrument.unit == "s" else f"`{instrument.unit}`"
    assert unit in row, f"{instrument.name}: unit {instrument.unit} not in its row"


@pytest.mark.parametrize("family", sorted(prometheus_families()))
def test_every_prometheus_name_is_documented(family: str) -> None:
    assert family in page("observability.md")


@pytest.mark.parametrize("attribute", sorted(span_attributes()))
def test_every_span_attribute_is_documented(attribute: str) -> None:
    assert f"`{attribute}`" in page("observability.md")


def test_every_outcome_is_documented() -> None:
    for outcome in OUTCOMES:
        assert f"`{outcome}`" in page("observability.md"), outcome
        assert f"`{outcome}`" in page("semantics.md"), outcome


def _promql(expression: str, where: str) -> None:
    """Every metric ``expression`` names is exported, with the labels and outcomes it selects."""
    series = prometheus_series_names()
    exposition = prometheus_exposition()
    for metric in re.findall(r"\bjobhost_\w+", expression):
        assert metric in series, f"{where}: {metric} is not exported"
    for selector in re.findall(r"\bjobhost_\w+\{([^}]*)\}", expression):
        for label, value in re.findall(r'(\w+)=~?"([^"]*)"', selector):
            exported = "job" if label == "exported_job" else label
            assert f'{exported}="' in exposition, f"{where}: no label {label}"
            if label == "outcome":
                assert set(value.split("|")) <= set(OUTCOMES), value


def alert_rules() -> list[dict[str, Any]]:
    yaml = importlib.import_module("yaml")
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def test_the_alert_rules_name_only_exported_metrics_labels_and_outcomes() -> None:
    rules = alert_rules()
    alerts = " ".join(rule["alert"] for rule in rules)
    for topic in ("Failed", "Overdue", "NoLiveHost", "Behind", "ClockSkew", "Stuck", "Store"):
        assert topic in alerts, f"no alert rule about {topic}"
    for rule in rules:
        _promql(rule["expr"], rule["alert"])


def test_the_dashboard_names_only_exported_metrics_labels_and_outcomes() -> None:
    checked = 0
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            _promql(target["expr"], f"panel {panel['title']}")
            checked += 1
    assert checked >= 10, f"only {checked} dashboard queries were checked"


def test_every_alert_has_its_section_in_the_manual_and_the_manual_includes_the_files() -> None:
    text = page("observability.md")
    headings = set(re.findall(r"^#+ (\S+)$", text, flags=re.MULTILINE))
    for rule in alert_rules():
        assert rule["alert"] in headings, f"observability.md has no section {rule['alert']}"
        anchor = rule["annotations"]["runbook"].split("#", 1)[1]
        assert anchor == rule["alert"].lower()
    for path in ("deploy/prometheus/jobhost-rules.yaml", "deploy/grafana/jobhost.json"):
        assert f"({'../../' + path})" in text, f"observability.md does not link {path}"
    # The rules live in their file: the manual links it rather than keeping a copy.
    assert not fenced_blocks(text, "yaml") or all(
        "groups:" not in block for block in fenced_blocks(text, "yaml")
    )
