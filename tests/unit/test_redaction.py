"""Redacting passwords from free text: the same matches as before, in linear time, and bounded."""

from __future__ import annotations

import random
import re

from jobhost_contracts import redact_text
from jobhost_contracts.redaction import ERROR_TEXT_LIMIT, bound_text

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
