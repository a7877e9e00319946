"""The alert rules in deploy/prometheus: Prometheus loads them, and promtool's unit tests make
every alert fire and stay silent.

promtool comes with Debian's ``prometheus`` package (``.ci/run`` installs it when missing).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "jobhost-rules.yaml"
RULE_TESTS = PROMETHEUS / "jobhost-rules.test.yaml"

# What an operator is woken for, each an alert of its own.
ALERTS = {
    "JobhostRunFailed": "a run failed",
    "JobhostJobFailing": "a job is failing until something succeeds",
    "JobhostJobKeepsFailing": "a job keeps failing",
    "JobhostCriticalJobOverdue": "a critical job overdue",
    "JobhostNoLiveHost": "no live host",
    "JobhostHostBehind": "a host behind",
    "JobhostClockSkew": "clock skew",
    "JobhostStuckRuns": "stuck runs",
    "JobhostAuditSinkFailing": "audit sink failing",
    "JobhostStoreUnreachable": "store unreachable",
}
# Alerts about one job: their descriptions name it.
PER_JOB = {
    "JobhostRunFailed",
    "JobhostJobFailing",
    "JobhostJobKeepsFailing",
    "JobhostOccurrencesMissed",
}
# Alerts whose annotations link to the dashboard when the gauges carry dashboard_url.
LINKED = {"JobhostJobFailing", "JobhostJobKeepsFailing"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found is not None, (
        "promtool is not installed: `apt-get install prometheus` (Debian's package; .ci/run "
        "installs it)"
    )
    return found


@cache
def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        cwd=PROMETHEUS,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_the_operator_needs_is_there() -> None:
    names = {rule["alert"] for rule in rules()}
    assert set(ALERTS) <= names, set(ALERTS) - names


def test_every_alert_has_a_firing_and_a_silent_unit_test() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    for rule in rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case.get("exp_alerts") for case in mine), f"{rule['alert']} never fires"
        assert any(not case.get("exp_alerts") for case in mine), f"{rule['alert']} never silent"
        fired = [alert for case in mine for alert in case.get("exp_alerts") or []]
        assert all(alert.get("exp_annotations") for alert in fired), (
            f"{rule['alert']}: a firing case does not check the rendered annotations"
        )


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: str(rule["alert"]))
def test_every_description_names_the_command_that_explains_it(rule: dict[str, Any]) -> None:
    description = rule["annotations"]["description"]
    assert re.search(r"`jobhost [a-z]+", description), description
    if rule["alert"] in PER_JOB:
        assert "{{ $labels.exported_job }}" in description
    assert rule["annotations"]["runbook"].startswith("docs/operations/observability.md#")
    # A severity may be a template choosing between severities (by the job's criticality).
    severities = re.sub(r"\{\{[^}]*\}\}", " ", rule["labels"]["severity"]).split()
    assert severities, rule["labels"]["severity"]
    assert set(severities) <= {"info", "warning", "critical"}, severities


def test_the_failing_alerts_link_to_the_job_and_its_failures() -> None:
    for rule in rules():
        if rule["alert"] in LINKED:
            annotations = rule["annotations"]
            assert "/jobs/{{ $labels.exported_job }}" in annotations["dashboard"]
            assert "/failures?job={{ $labels.exported_job }}" in annotations["failures"]
            assert "dashboard_url" in rule["expr"]


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: str(rule["alert"]))
def test_every_command_a_description_names_exists_with_its_flags(rule: dict[str, Any]) -> None:
    from tests.docs.manual_support import commands

    known = commands()
    text = re.sub(
        r"\{\{ \$labels\.exported_job \}\}", "billing.close-day", rule["annotations"]["description"]
    )
    shown = re.findall(r"`jobhost ([^`]+)`", " ".join(text.split()))
    assert shown, rule["alert"]
    for line in shown:
        name, *rest = line.split()
        assert name in known, f"{rule['alert']}: no command jobhost {name}"
        declared = {o for p in known[name].params for o in [*p.opts, *p.secondary_opts]}
        for flag in (token for token in rest if token.startswith("--")):
            assert flag in declared, f"{rule['alert']}: jobhost {name} has no {flag}"
