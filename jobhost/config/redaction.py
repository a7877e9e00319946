"""Keeping database passwords out of output, logs and errors."""

from __future__ import annotations

from jobhost_contracts import redact_text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["redact_text", "redact_url"]


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``; unparsable text is redacted by pattern."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return redact_text(url)
