"""The runbook's account of an outage matches the code and semantics.md: an outcome finished
while the store is away is kept until the store returns, not given up after a while."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "operations"


def _section(path: Path, title: str) -> str:
    text = path.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_runbook_keeps_an_outcome_until_the_store_returns_as_semantics_says() -> None:
    runbook = _section(DOCS / "runbook.md", "The database was down")
    semantics = (DOCS / "semantics.md").read_text()
    assert "kept in memory and written when the store returns, however long" in semantics
    bullet = next(b for b in runbook.split("\n- ") if b.startswith("a run that finishes"))
    flat = " ".join(bullet.split())
    assert "until the store returns, however long that takes" in flat
    assert not re.search(r"\bfor about \d+ ?s(econds)?\b", flat), flat


def test_the_log_lines_the_runbook_quotes_for_an_unrecorded_outcome_are_the_code_s() -> None:
    runbook = _section(DOCS / "runbook.md", "The database was down")
    bullet = next(b for b in runbook.split("\n- ") if b.startswith("a run that finishes"))
    source = "\n".join(p.read_text() for p in (ROOT / "jobhost").rglob("*.py"))
    for quoted in re.findall(r"`([^`]+)`", " ".join(bullet.split())):
        # Each run of literal words between placeholders (N, X, ...) is in the code.
        for piece in re.split(r"\b[NX]\b|\.\.\.", quoted):
            words = piece.strip(" ;:")
            if len(words) > 8:
                assert words in source, f"the runbook quotes {quoted!r}; no code says {words!r}"
