"""Metric series stay bounded: a handful per job, and none per job without the job label."""

from __future__ import annotations

import re

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from jobhost.envelope.reporting import (
    OUTCOMES,
    SERIES_PER_JOB,
    UNIT_RESULTS,
    Telemetry,
    metric_views,
)
from jobhost.web import prometheus_reader


def _exposition(job_label: bool, jobs: int, outcomes: tuple[str, ...] = OUTCOMES) -> str:
    reader, render = prometheus_reader()
    provider = MeterProvider(metric_readers=[reader], views=metric_views(job_label))
    telemetry = Telemetry(TracerProvider(), provider)
    for index in range(jobs):
        job = f"a.job-{index}"
        for outcome in outcomes:
            telemetry.runs.add(1, {"job": job, "outcome": outcome})
            telemetry.duration.record(3.0, {"job": job, "outcome": outcome})
        telemetry.lag.record(0.2, {"job": job})
    try:
        return render().decode()
    finally:
        provider.shutdown()


def _run_series(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if re.match(r"jobhost_run(s_total|_duration_seconds|_lag_seconds)", line)
    ]


@pytest.mark.parametrize("jobs", [1, 5])
def test_each_job_costs_at_most_the_documented_series(jobs: int) -> None:
    series = _run_series(_exposition(job_label=True, jobs=jobs))
    assert len(series) == jobs * SERIES_PER_JOB == jobs * 18
    assert not any('outcome="' in line for line in series if "duration" in line)


def test_past_the_sdks_default_cardinality_limit_every_job_keeps_its_series() -> None:
    # 2,500 jobs: 5,000 label sets of jobhost.runs and 2,500 of each histogram, all past the
    # SDK's default of 2,000 per instrument, which would fold the rest into one overflow series.
    jobs = 2500
    text = _exposition(job_label=True, jobs=jobs, outcomes=("succeeded", "failed"))
    assert "overflow" not in text
    counters = [line for line in text.splitlines() if line.startswith("jobhost_runs_total{")]
    assert len(counters) == jobs * 2
    lag = {
        match.group(1)
        for line in text.splitlines()
        if (match := re.match(r'jobhost_run_lag_seconds_count\{.*job="([^"]+)"', line))
    }
    assert lag == {f"a.job-{index}" for index in range(jobs)}


def test_without_the_job_label_the_series_do_not_grow_with_the_catalog() -> None:
    few = _run_series(_exposition(job_label=False, jobs=1))
    many = _run_series(_exposition(job_label=False, jobs=40))
    assert len(few) == len(many) == SERIES_PER_JOB
    assert not any('job="' in line for line in many)


@pytest.mark.parametrize("job_label", [True, False])
def test_fan_out_units_add_a_series_per_result_and_no_more(job_label: bool) -> None:
    reader, render = prometheus_reader()
    provider = MeterProvider(metric_readers=[reader], views=metric_views(job_label))
    telemetry = Telemetry(TracerProvider(), provider)
    for index in range(4):
        for result in UNIT_RESULTS:
            telemetry.units.add(3, {"job": f"a.job-{index}", "result": result, "unit": "x"})
    try:
        text = render().decode()
    finally:
        provider.shutdown()
    series = [line for line in text.splitlines() if line.startswith("jobhost_run_units_total{")]
    jobs = 4 if job_label else 1
    assert len(series) == jobs * len(UNIT_RESULTS)
    assert not any('unit="' in line for line in series)
    assert all(line.endswith(" 3.0") == job_label for line in series)
