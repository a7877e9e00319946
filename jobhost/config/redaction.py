"""Keeping database passwords out of output, logs and errors."""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["redact_text", "redact_url"]

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@")


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``; unparsable text is redacted by pattern."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return redact_text(url)


def redact_text(text: str) -> str:
    """Every ``scheme://user:password@`` in free text (a driver's error message) redacted."""
    return _USERINFO.sub(r"\g<scheme>:***@", text)
