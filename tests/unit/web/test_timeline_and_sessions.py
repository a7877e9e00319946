"""The dashboard's pure parts: where the timeline places runs, and how sessions are checked."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.responses import Response

from jobhost.config import Settings, load_settings
from jobhost.errors import ConfigError
from jobhost.records import RunRecord
from jobhost.web.console.auth import COOKIE, SessionKeeper, same_origin
from jobhost.web.console.views import timeline

NOW = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)  # the Berlin spring-forward day


def run(outcome: str, occurrence: datetime | None, took: float = 60, **extra: Any) -> RunRecord:
    started = (occurrence or NOW) + timedelta(seconds=1)
    finished = None if outcome in {"running", "missed"} else started + timedelta(seconds=took)
    values: dict[str, Any] = {
        "id": f"r-{outcome}-{occurrence}",
        "job_name": "a.b",
        "occurrence": occurrence,
        "attempt": 1,
        "source": "schedule",
        "outcome": outcome,
        "reason": None,
        "host_id": "h1",
        "fencing_token": 1,
        "idempotency_key": None,
        "requested_by": None,
        "queued_at": started,
        "not_before": None,
        "started_at": None if outcome == "missed" else started,
        "finished_at": finished,
        "lease_expires_at": None,
        "error_type": None,
        "error_message": "disk full" if outcome == "failed" else None,
        "trace_id": None,
    }
    return RunRecord(**{**values, **extra})


def test_runs_are_placed_at_their_occurrence_and_as_wide_as_they_ran() -> None:
    day = timedelta(hours=24)
    failed = run("failed", NOW - timedelta(hours=6), took=3600)
    missed = run("missed", NOW - timedelta(hours=18))
    old = run("succeeded", NOW - timedelta(hours=30))
    laid = timeline([failed, missed, old], now=NOW, span=day, zone="Europe/Berlin")
    assert [(m.outcome, m.x) for m in laid.marks] == [("missed", 25.0), ("failed", 75.0)]
    assert laid.marks[1].width == pytest.approx(100 / 24, abs=0.01)
    assert laid.marks[0].width == 0.4  # never narrower than a sliver
    assert "disk full" in laid.marks[1].label and "on h1" in laid.marks[1].label
    assert laid.counts == {"failed": 1, "missed": 1}


def test_a_run_at_the_right_edge_stays_inside_and_a_running_one_lasts_until_now() -> None:
    running = run("running", NOW - timedelta(minutes=30))
    edge = run("succeeded", NOW - timedelta(seconds=5))
    laid = timeline([running, edge], now=NOW, span=timedelta(hours=24), zone="UTC")
    by = {m.outcome: m for m in laid.marks}
    assert by["succeeded"].x + by["succeeded"].width <= 100.0
    assert by["running"].width == pytest.approx(30 / (24 * 60) * 100, abs=0.01)


def test_ticks_follow_the_zone_across_daylight_saving() -> None:
    laid = timeline([], now=NOW, span=timedelta(hours=24), zone="Europe/Berlin")
    labels = [tick.label for tick in laid.ticks]
    # 02:00 does not exist in Berlin that night: the 3-hour steps run 15:00 ... 00:00, 03:00.
    assert labels[:4] == ["15:00", "18:00", "21:00", "00:00"]
    assert "03:00" in labels and "02:00" not in labels
    week = timeline([], now=NOW, span=timedelta(days=7), zone="UTC")
    assert len(week.ticks) == 7 and week.ticks[0].label == "Mon 23 Mar"


def _request(cookie: str | None = None, scheme: str = "http", **headers: str) -> Any:
    return SimpleNamespace(
        cookies={COOKIE: cookie} if cookie else {},
        headers=headers,
        url=SimpleNamespace(scheme=scheme),
    )


def _cookie(response: Response) -> str:
    header = response.headers["set-cookie"]
    assert "httponly" in header.lower() and "samesite=strict" in header.lower()
    return header.split(";", 1)[0].split("=", 1)[1]


def test_a_session_is_signed_bound_to_the_tokens_and_refused_when_tampered() -> None:
    keeper = SessionKeeper({"alice": "a" * 20, "bob": "b" * 20})
    assert keeper.identify("b" * 20) == ("bob", "operator")
    assert keeper.identify("c" * 20) is None
    response = Response()
    started = keeper.start(response, "alice", secure=False)
    cookie = _cookie(response)
    read = keeper.read(_request(cookie))
    assert read is not None and (read.who, read.csrf) == ("alice", started.csrf)
    value, _, signature = cookie.rpartition(".")
    assert keeper.read(_request(f"{value}.{'0' * len(signature)}")) is None
    forged = value.replace(value[5], "A" if value[5] != "A" else "B", 1)
    assert keeper.read(_request(f"{forged}.{signature}")) is None
    # New tokens sign everyone out; a removed operator's session is void.
    assert SessionKeeper({"alice": "z" * 20}).read(_request(cookie)) is None
    assert SessionKeeper({}).read(_request(cookie)) is None


def test_a_post_from_another_site_is_recognised() -> None:
    assert same_origin(_request(host="jobs:8080"))
    assert same_origin(_request(host="jobs:8080", origin="http://jobs:8080"))
    assert not same_origin(_request(host="jobs:8080", origin="https://evil.example"))
    assert not same_origin(_request(host="jobs:8080", origin="null"))
    # The scheme counts: a page served over http is another origin than https on the same host.
    assert not same_origin(_request(host="jobs:8080", origin="https://jobs:8080"))
    assert same_origin(_request(host="jobs:8080", origin="https://jobs:8080", scheme="https"))


def _signed(key: bytes, payload: dict[str, object]) -> str:
    value = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    return f"{value}.{hmac.new(key, value.encode(), hashlib.sha256).hexdigest()}"


def test_a_reader_cookie_forged_from_the_settings_file_is_refused() -> None:
    readers = {hashlib.sha256(b"reader-secret").hexdigest(): "ci"}
    keeper = SessionKeeper({}, readers)
    # The key the settings file alone used to give: the readers' digests.
    material = "".join(f"{d}={name}" for d, name in sorted(readers.items()))
    old_key = hashlib.sha256(b"jobhost-console\0" + material.encode()).digest()
    payload = {"who": "ci", "csrf": "x", "exp": time.time() + 3600, "role": "reader", "ver": 0}
    assert keeper.read(_request(_signed(old_key, payload))) is None
    # A real sign-in still reads back; another process (a random key of its own) refuses it.
    response = Response()
    keeper.start(response, "ci", secure=False, role="reader")
    cookie = _cookie(response)
    assert keeper.read(_request(cookie)) is not None
    assert SessionKeeper({}, readers).read(_request(cookie)) is None


def test_a_session_secret_is_shared_by_replicas_and_rotating_it_signs_everyone_out() -> None:
    secret = "s" * 40
    readers = {hashlib.sha256(b"reader-secret").hexdigest(): "ci"}
    response = Response()
    SessionKeeper({"alice": "a" * 20}, readers, secret).start(response, "alice", secure=False)
    cookie = _cookie(response)
    assert SessionKeeper({"alice": "a" * 20}, readers, secret).read(_request(cookie)) is not None
    assert SessionKeeper({"alice": "a" * 20}, readers, "t" * 40).read(_request(cookie)) is None
    # Without the secret, the tokens alone no longer make the key.
    assert SessionKeeper({"alice": "a" * 20}, readers).read(_request(cookie)) is None


def test_a_validly_signed_session_past_its_lifetime_is_refused() -> None:
    keeper = SessionKeeper({"alice": "a" * 20}, secret="s" * 40)
    now = time.time()
    for expires in (now + 10 * 365 * 86400, now + 9 * 3600, now - 1):
        payload = {"who": "alice", "csrf": "x", "exp": expires, "role": "operator", "ver": 0}
        value = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
        assert keeper.read(_request(f"{value}.{keeper._sign(value)}")) is None, expires
    payload = {"who": "alice", "csrf": "x", "exp": now + 3600, "role": "operator", "ver": 0}
    value = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    assert keeper.read(_request(f"{value}.{keeper._sign(value)}")) is not None


def test_a_session_secret_is_long_and_never_shown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(ValueError, match="at least 32 characters"):
        Settings(database_url=url, session_secret="short-secret")
    settings = Settings(database_url=url, session_secret="k" * 32)
    assert "k" * 32 not in repr(settings)
    assert Settings(database_url=url, session_secret="").session_secret is None
    config = tmp_path / "jobhost.toml"
    config.write_text('session_secret = "short-secret"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    assert "short-secret" not in str(refused.value)
    assert "session_secret" in str(refused.value)
