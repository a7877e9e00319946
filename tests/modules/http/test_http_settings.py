"""[[modules.http.jobs]]: declarations, and refusals naming the entry and the key."""

from __future__ import annotations

import importlib.metadata
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest
from jobhost_contracts import MisfirePolicy, OverlapPolicy, RetryPolicy
from jobhost_http.plugin import jobhost_jobs
from jobhost_http.settings import HttpJobSettings, parse_jobs

BASE = {"name": "ping", "interval": "20s", "url": "http://127.0.0.1:9/health"}


def declare(*entries: dict[str, Any]) -> list[Any]:
    return jobhost_jobs(settings={"http": {"jobs": list(entries)}})


def test_no_section_declares_nothing() -> None:
    assert jobhost_jobs(settings=MappingProxyType({"files": {}})) == []


def test_an_entry_becomes_a_declaration_of_module_http() -> None:
    [(declaration, _executor)] = declare(
        {
            **BASE,
            "timeout": "10s",
            "enabled": False,
            "critical": False,
            "description": "keeps the partner's session warm",
            "misfire": "skip",
            "misfire_grace": "1m",
            "overlap": "allow",
            "max_concurrent": 2,
            "catch_up_limit": 3,
            "max_attempts": 2,
            "backoff": "5s",
            "backoff_max": "1m",
        }
    )

    assert declaration.name == "http.ping"
    assert (declaration.module, declaration.configuration_source) == ("http", "http")
    assert declaration.interval == timedelta(seconds=20) and declaration.cron is None
    assert declaration.timeout == timedelta(seconds=15)  # the call's 10s + 5s
    assert not declaration.enabled
    assert declaration.description == "keeps the partner's session warm"
    assert declaration.misfire is MisfirePolicy.SKIP
    assert declaration.misfire_grace == timedelta(minutes=1)
    assert (declaration.overlap, declaration.max_concurrent) == (OverlapPolicy.ALLOW, 2)
    assert declaration.catch_up_limit == 3
    assert declaration.retry == RetryPolicy(
        max_attempts=2, backoff=timedelta(seconds=5), backoff_max=timedelta(minutes=1)
    )


def test_defaults_and_a_dotted_name_kept_as_written() -> None:
    [(declaration, _)] = declare(
        {"name": "billing.warmup", "cron": "*/5 * * * *", "url": "https://example.org/"}
    )

    assert declaration.name == "billing.warmup"
    assert declaration.cron == "*/5 * * * *" and declaration.timezone == "UTC"
    assert declaration.timeout == timedelta(seconds=35)
    assert declaration.description == "GET https://example.org/"
    assert (declaration.misfire, declaration.overlap) == (
        MisfirePolicy.RUN_ONCE,
        OverlapPolicy.FORBID,
    )
    assert declaration.retry.max_attempts == 1


def test_the_host_read_only_section_is_accepted() -> None:
    section = MappingProxyType({"jobs": (MappingProxyType({**BASE, "expect_status": (200, 204)}),)})

    [job] = parse_jobs(section)

    assert job.expect_status == frozenset({200, 204})


@pytest.mark.parametrize(
    ("entry", "fragments"),
    [
        ({"name": None}, ["modules.http.jobs[0]", "name", "required"]),
        ({"colour": "blue"}, ["jobs[0] 'ping'", "'colour'", "not a known key"]),
        ({"url": "ftp://x/y"}, ["jobs[0] 'ping'", "url", "ftp://x/y", "http://"]),
        ({"url": None}, ["jobs[0] 'ping'", "url", "required"]),
        ({"url": "http://h:port/"}, ["jobs[0] 'ping'", "url", "h:port", "not a number"]),
        ({"method": "FETCH"}, ["jobs[0] 'ping'", "method", "FETCH", "GET"]),
        ({"cron": "* * * * *"}, ["jobs[0] 'ping'", "both cron and interval"]),
        ({"interval": None}, ["jobs[0] 'ping'", "needs cron"]),
        ({"interval": "often"}, ["jobs[0] 'ping'", "interval", "often", "duration"]),
        ({"timeout": "0s"}, ["jobs[0] 'ping'", "timeout", "positive"]),
        ({"expect_status": 99}, ["jobs[0] 'ping'", "expect_status", "99", "100-599"]),
        ({"expect_status": [200, "ok"]}, ["jobs[0] 'ping'", "expect_status", "'ok'"]),
        ({"misfire": "later"}, ["jobs[0] 'ping'", "misfire", "run_once|catch_up|skip"]),
        ({"overlap": "queue"}, ["jobs[0] 'ping'", "overlap", "forbid|allow"]),
        ({"max_attempts": 0}, ["jobs[0] 'ping'", "max_attempts", "at least 1"]),
        ({"enabled": "yes"}, ["jobs[0] 'ping'", "enabled", "true or false"]),
        ({"headers": {"Bad Name": "x"}}, ["jobs[0] 'ping'", "headers", "Bad Name"]),
        ({"headers": {"X-A": "a\r\nX-B: b"}}, ["jobs[0] 'ping'", "headers.X-A", "line break"]),
        ({"secret_headers": {"X-A": "not a var"}}, ["jobs[0] 'ping'", "secret_headers.X-A"]),
        (
            {"headers": {"X-A": "1"}, "secret_headers": {"x-a": "VAR"}},
            ["jobs[0] 'ping'", "'x-a'", "both headers and secret_headers"],
        ),
    ],
)
def test_bad_entries_are_refused_naming_the_entry_and_the_key(
    entry: dict[str, Any], fragments: list[str]
) -> None:
    merged = {key: value for key, value in {**BASE, **entry}.items() if value is not None}

    with pytest.raises(ValueError) as raised:
        declare(merged)

    for fragment in fragments:
        assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "entry",
    [
        {"headers": {"Idempotency-Key": "mine"}},
        {"headers": {"idempotency-key": "mine"}},
        {"secret_headers": {"IDEMPOTENCY-KEY": "MY_KEY"}},
    ],
)
def test_a_job_may_not_set_its_own_idempotency_key(entry: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as raised:
        declare({**BASE, **entry})

    assert "jobs[0] 'ping'" in str(raised.value)
    assert "idempotency-key" in str(raised.value).lower() and "remove it" in str(raised.value)


def test_a_second_entry_is_named_by_its_position_and_duplicates_are_refused() -> None:
    with pytest.raises(ValueError, match=r"jobs\[1\] 'other': method"):
        declare(BASE, {**BASE, "name": "other", "method": 5})
    with pytest.raises(ValueError, match=r"jobs\[1\] 'ping': name 'http.ping' is already used"):
        declare(BASE, BASE)


def test_unknown_keys_of_the_section_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\[modules.http\] job = .*did you mean 'jobs'"):
        jobhost_jobs(settings={"http": {"job": [BASE]}})


def test_repr_hides_credentials() -> None:
    [job] = parse_jobs(
        {
            "jobs": [
                {
                    **BASE,
                    "url": "https://user:pa55word@example.org/hook?sig=abc123",
                    "headers": {"X-Api-Key": "literal-key-42", "Accept": "text/plain"},
                    "secret_headers": {"Authorization": "PING_TOKEN"},
                    "body": "password=hunter2",
                }
            ]
        }
    )

    shown = repr(job)

    assert isinstance(job, HttpJobSettings)
    for secret in ("pa55word", "abc123", "literal-key-42", "hunter2"):
        assert secret not in shown
    assert "text/plain" in shown and "PING_TOKEN" in shown


def test_the_plugin_is_offered_through_the_jobhost_entry_point() -> None:
    offered = {
        point.name: point.value for point in importlib.metadata.entry_points(group="jobhost")
    }

    assert offered.get("http") == "jobhost_http.plugin"
