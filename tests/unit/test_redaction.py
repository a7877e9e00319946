"""Redacting credentials from free text: URL passwords as before, the shapes credentials take,
never ordinary words, in linear time, bounded, and the operator's own patterns beside them."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from jobhost_contracts import redact_text
from jobhost_contracts.redaction import ERROR_TEXT_LIMIT, bound_text

from jobhost.config import load_settings
from jobhost.config import redact_text as redact_with_operators
from jobhost.config.redaction import use_redact_patterns
from jobhost.envelope.runlog import storable_text
from jobhost.errors import ConfigError

# The pattern redact_text used to be: the reference for what it must find.
_REFERENCE = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@")


def test_passwords_in_urls_are_redacted() -> None:
    assert redact_text("postgresql://app:S3cretPW@db/app") == "postgresql://app:***@db/app"
    text = "connect postgresql+psycopg://ops:hunter2@127.0.0.1:1/app failed; http://a@b ok"
    assert redact_text(text) == (
        "connect postgresql+psycopg://ops:***@127.0.0.1:1/app failed; http://a@b ok"
    )


def test_it_finds_exactly_what_the_reference_pattern_finds() -> None:
    rng = random.Random(11)
    alphabet = "a1:/@ .-+Z\nx"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        text = text.replace("x", "://")
        assert redact_text(text) == _REFERENCE.sub(r"\g<scheme>:***@", text), text


def test_megabytes_of_text_that_defeat_a_backtracking_pattern_are_handled() -> None:
    # Each took minutes with the single pattern (a run of letters is searched for :// from every
    # position); a test that did not finish would hang the suite, so each is checked for output.
    for text in (
        "a" * 5_000_000,
        "x://u:" * 200_000,
        "a" * 1_000_000 + "://u:pw@host",
        "a://" * 200_000,
    ):
        assert "pw@" not in redact_text(text)
    assert redact_text("a" * 1_000_000 + "://u:pw@host").endswith("://u:***@host")


def test_long_text_is_cut_with_its_length_kept() -> None:
    assert bound_text("short") == "short"
    cut = bound_text("x" * 5_000_000)
    assert len(cut) < ERROR_TEXT_LIMIT + 100
    assert cut.endswith("... [cut: 5000000 characters in all]")


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Authorization: Bearer abc.def-123", "Authorization: Bearer ***"),
        ("authorization=Basic dXNlcjpwYXNz", "authorization=Basic ***"),
        ('{"Authorization": "Bearer xyz123456"}', '{"Authorization": "Bearer ***"}'),
        ("{'Proxy-Authorization': 'Basic dXNlcjpwYXNz'}", "{'Proxy-Authorization': 'Basic ***'}"),
        ("retrying with bearer eyJhbGciOi.x_y", "retrying with bearer ***"),
        ("password=hunter2 and more", "password=*** and more"),
        ("PASSWD: hunter2", "PASSWD: ***"),
        ("pwd='a b c' next", "pwd='***' next"),
        ("host=db user=app password=S3cret dbname=app", "host=db user=app password=*** dbname=app"),
        ("GET /x?api_key=abc123&page=2", "GET /x?api_key=***&page=2"),
        ("X-Api-Key: k-123", "X-Api-Key: ***"),
        ("apikey=abc", "apikey=***"),
        ('{"db_password": "a\\"b", "n": 1}', '{"db_password": "***", "n": 1}'),
        ('{"token": "t0k"}', '{"token": "***"}'),
        ("client_secret=abc; next", "client_secret=***; next"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY=***"),
        ("key AKIAIOSFODNN7EXAMPLE used", "key AKIA*** used"),
        ("ASIAY34FZKBOKMUTVV7A.", "ASIA***."),
        ("charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc", "charge with sk_live_***"),
        ("sk_test_abcdefgh12 ok", "sk_test_*** ok"),
        ("push ghp_abcdefghijklmnopqrstuvwxyz0123456789", "push ghp_***"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijkl", "github_pat_***"),
        ("slack xoxb-123456789012-abcdefghij", "slack xoxb-***"),
        ("maps AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "maps AIza***"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlMTIz end",
            "jwt eyJ*** end",
        ),
        (
            "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow-IBAAK\n-----END RSA PRIVATE KEY-----\nb",
            "a\n-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----\nb",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQ (cut)", "-----BEGIN PRIVATE KEY-----***"),
    ],
)
def test_credentials_are_redacted_and_the_text_around_them_kept(text: str, redacted: str) -> None:
    assert redact_text(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "the tokenizer is loaded",
        "tokenizer=bert max_tokens=100 token_count=3",
        "password reset email sent to 12 users",
        "secrets rotated; passwords expire in 90 days",
        "basic configuration applied",
        "missing bearer token",
        "Bearer authentication failed",
        "Asia/Tokyo at 09:00, AKIA is a prefix",
        "the key: value pairs were read",
        "skipped sk_live_short",
        "keyboard=us keys=3 monkey=1",
        "jobhost.job.vault.rotate-secret: rotated",
        "credentials: refreshed",
    ],
)
def test_ordinary_words_are_not_redacted(text: str) -> None:
    assert redact_text(text) == text


def test_credential_patterns_stay_linear_on_megabytes() -> None:
    for text in (
        "password" * 200_000,
        "a-" * 1_000_000,
        "bearer " * 200_000,
        "x_token" * 200_000 + "=",
        "-----BEGIN PRIVATE KEY-----" + "-" * 1_000_000,
        '{"password": "' + "\\" * 1_000_000,
        "Authorization: " * 100_000,
    ):
        started = time.perf_counter()
        redact_text(text)
        assert time.perf_counter() - started < 5, text[:40]


def test_an_operators_patterns_are_checked_at_load_and_redact_beside_the_known_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "jobhost.toml"
    monkeypatch.delenv("JOBHOST_REDACT_PATTERNS", raising=False)
    config.write_text("redact_patterns = ['customer=(?P<secret>[0-9]+', 'x*']\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    problems = "\n".join(refused.value.problems)
    assert "redact_patterns" in problems
    assert "is not a regular expression: missing ), unterminated subpattern" in problems
    assert "matches the empty text" in problems
    config.write_text("redact_patterns = ['customer=(?P<secret>[0-9]+)', 'INTERNAL-[A-Z]{6}']\n")
    try:
        load_settings(config)
        assert redact_with_operators("for customer=12345 with INTERNAL-ABCDEF, password=pw") == (
            "for customer=*** with ***, password=***"
        )
        assert storable_text("customer=9") == "customer=***"
    finally:
        use_redact_patterns([])
    assert redact_with_operators("customer=12345") == "customer=12345"
