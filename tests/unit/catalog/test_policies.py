"""Policy values a host cannot honour are catalog problems, and keep the job out of the schedule."""

from __future__ import annotations

import pytest

from tests.unit.catalog.plugin_files import Plugins


@pytest.mark.parametrize(
    "fields,code,message",
    [
        ("timeout=timedelta(seconds=-5)", "bad-timeout", "timeout = -5s: must be positive"),
        ("timeout=timedelta(0)", "bad-timeout", "timeout = 0s: must be positive"),
        ("lease=timedelta(seconds=0)", "bad-lease", "lease = 0s: must be at least 2x"),
        ("lease=timedelta(seconds=6)", "bad-lease", "i.e. at least 10s"),
        ("misfire_grace=timedelta(seconds=-1)", "bad-misfire", "misfire_grace = -1s"),
        ("catch_up_limit=0", "bad-misfire", "catch_up_limit = 0: must be 1 to 10000"),
        ("max_concurrent=0", "bad-overlap", "max_concurrent = 0: must be 1 to 1024"),
        (
            "retry=RetryPolicy(max_attempts=0)",
            "bad-retry",
            "retry.max_attempts = 0: must be 1 (no retry) to 100",
        ),
        (
            "retry=RetryPolicy(max_attempts=3, backoff=timedelta(seconds=-30))",
            "bad-retry",
            "retry.backoff = -30s",
        ),
        (
            "retry=RetryPolicy(backoff=timedelta(minutes=5), backoff_max=timedelta(minutes=1))",
            "bad-retry",
            "must not be shorter than backoff (5m)",
        ),
        ("retry=RetryPolicy(jitter=2.0)", "bad-retry", "retry.jitter = 2.0: must be 0 to 1"),
        (
            "retry=RetryPolicy(retry_on=frozenset({'faild'}))",
            "bad-retry",
            "retry.retry_on = ['faild']: names no outcome",
        ),
    ],
)
def test_a_policy_the_host_cannot_honour_is_a_problem_and_the_job_is_left_out(
    plugins: Plugins, fields: str, code: str, message: str
) -> None:
    plugins.add(
        f'job("files.purge", interval=timedelta(hours=6), {fields})',
        'job("files.other", interval=timedelta(hours=6))',
    )
    plugin = plugins.root / "plugin0.py"
    plugin.write_text(
        plugin.read_text().replace(
            "import BackgroundJobDeclaration,", "import RetryPolicy, BackgroundJobDeclaration,"
        )
    )
    catalog = plugins.catalog()
    problems = [p for p in catalog.problems if p.job == "files.purge"]
    assert [p.code for p in problems] == [code], catalog.problems
    assert message in problems[0].message
    assert "fix the declaration in module files" in problems[0].message
    assert list(catalog.jobs) == ["files.other"]


def test_sound_policies_are_no_problem(plugins: Plugins) -> None:
    plugins.add(
        'job("files.purge", interval=timedelta(hours=6), timeout=timedelta(minutes=5), '
        "lease=timedelta(minutes=2), max_concurrent=3, catch_up_limit=5)"
    )

    catalog = plugins.catalog()

    assert catalog.problems == []
    assert "files.purge" in list(catalog.jobs)
