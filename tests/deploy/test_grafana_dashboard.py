"""deploy/grafana/jobhost.json: a Grafana 10+ dashboard that imports into any Grafana whose
Prometheus scrapes the replicas, chosen through its data-source variable.

The expressions themselves are evaluated by a real Prometheus in
tests/process/test_prometheus_server.py, and checked against the exported metrics in
tests/docs.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "jobhost.json"
# Grafana 10.0 writes schemaVersion 38.
GRAFANA_10_SCHEMA = 38
# What the dashboard shows, each a panel (by a word of its title) with the metric it reads.
PANELS = {
    "Runs by outcome": "jobhost_runs_total",
    "lag percentiles": "jobhost_run_lag_seconds_bucket",
    "Schedule lag per host": "jobhost_schedule_lag_seconds",
    "Jobs by status": "jobhost_jobs",
    "Failing jobs": "jobhost_runs_total",
    "Stuck runs": "jobhost_stuck_runs",
    "Fan-out units": "jobhost_run_units_total",
    "Live hosts": "jobhost_live_hosts",
    "Clock skew": "jobhost_clock_skew_seconds",
}


@cache
def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def test_it_is_a_grafana_10_dashboard_with_a_prometheus_data_source_variable() -> None:
    assert dashboard()["schemaVersion"] >= GRAFANA_10_SCHEMA
    assert dashboard()["uid"] == "jobhost"
    (variable,) = [v for v in dashboard()["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    assert "__inputs" not in dashboard(), "a data-source variable, not an import-time input"


def test_every_panel_and_query_reads_the_chosen_data_source() -> None:
    name = next(v["name"] for v in dashboard()["templating"]["list"] if v["type"] == "datasource")
    wanted = {"type": "prometheus", "uid": f"${{{name}}}"}
    for panel in panels():
        assert panel["datasource"] == wanted, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target.get("datasource", wanted) == wanted, panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_it_shows_what_operators_look_for() -> None:
    for title, metric in PANELS.items():
        found = [p for p in panels() if title.lower() in p["title"].lower()]
        assert found, f"no panel {title!r}"
        assert any(metric in t["expr"] for p in found for t in p["targets"]), (title, metric)


def test_panel_ids_are_unique_and_panels_fit_the_grid() -> None:
    every = dashboard()["panels"]
    ids = [panel["id"] for panel in every]
    assert len(ids) == len(set(ids))
    for panel in every:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert grid["h"] > 0 and grid["y"] >= 0, panel["title"]
    refs = [[t["refId"] for t in p["targets"]] for p in panels()]
    assert all(len(r) == len(set(r)) for r in refs)
