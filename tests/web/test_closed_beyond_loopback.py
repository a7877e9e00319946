"""Reading is closed by default beyond loopback: ``jobhost run`` listening on every address with
no ``web_read_access`` asks for a sign-in on the dashboard and a token on /report and the API,
while the probes and /metrics answer as before; a loopback listener stays open. Real processes,
real requests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jobhost.config import Settings
from tests.api.api_support import SECRETS, write_config
from tests.http_get import answers, get
from tests.ports import free_port


@pytest.mark.parametrize(
    ("host", "setting", "expected"),
    [
        ("127.0.0.1", None, "open"),
        ("127.0.0.2", None, "open"),
        ("::1", None, "open"),
        ("localhost", None, "open"),
        ("0.0.0.0", None, "token"),
        ("::", None, "token"),
        ("10.0.0.7", None, "token"),
        ("jobhost.internal", None, "token"),
        ("0.0.0.0", "open", "open"),
        ("127.0.0.1", "token", "token"),
    ],
)
def test_who_may_read_follows_the_listener_unless_set(
    host: str, setting: str | None, expected: str
) -> None:
    settings = Settings(database_url="sqlite:///unused.db", web_read_access=setting)
    assert settings.read_access_for(host) == expected


@contextmanager
def _host(tmp_path: Path, *command: str, listen: str) -> Iterator[tuple[str, Path]]:
    config = write_config(tmp_path / "jobhost.toml", f"sqlite:///{tmp_path}/store.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env |= {"JOBHOST_LOAD_PLUGINS": "", "JOBHOST_HTTP_LISTEN": listen}
    log = tmp_path / "host.log"
    if command[0] == "serve":  # serves an existing store only
        upgrade = [sys.executable, "-m", "jobhost", "--config", str(config), "db", "upgrade"]
        subprocess.run(upgrade, env=env, check=True, capture_output=True)
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "jobhost", "--config", str(config), *command],
            env=env,
            stdout=out,
            stderr=out,
        )
    base = f"http://127.0.0.1:{listen.rsplit(':', 1)[1]}"
    try:
        deadline = time.monotonic() + 60
        while not answers(base + "/healthz"):
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()
            time.sleep(0.2)
        yield base, log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def test_a_host_on_every_address_closes_reading_and_keeps_its_probes(tmp_path: Path) -> None:
    with _host(tmp_path, "run", listen=f"0.0.0.0:{free_port()}") as (base, log):
        assert get(base + "/")[0] == 401
        assert get(base + "/failures")[0] == 401
        assert get(base + "/report")[0] == 401
        assert get(base + "/api/v1/jobs")[0] == 401
        assert get(base + "/healthz")[0] == 200
        deadline = time.monotonic() + 30
        while get(base + "/readyz")[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert get(base + "/metrics")[0] == 200  # metrics_access, unchanged: open
        signed = _bearer(base + "/api/v1/jobs", SECRETS["reader"][0])
        assert signed == 200
        assert _bearer(base + "/report", SECRETS["reader"][0]) == 200
        said = [line for line in log.read_text().splitlines() if "reading" in line]
    assert len(said) == 1, said
    assert "reading closed" in said[0] and "web_read_access unset" in said[0]


def test_a_loopback_listener_stays_open(tmp_path: Path) -> None:
    with _host(tmp_path, "serve", listen=f"127.0.0.1:{free_port()}") as (base, log):
        assert get(base + "/")[0] == 200
        assert get(base + "/api/v1/jobs")[0] == 401  # the API always needs its tokens
        said = [line for line in log.read_text().splitlines() if "reading" in line]
    assert said == [line for line in said if "reading open" in line] and len(said) == 1, said


def _bearer(url: str, secret: str) -> int:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code
