"""Keeping passwords in URLs out of messages, for the host and for modules alike."""

from __future__ import annotations

import re

__all__ = ["redact_text"]

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@")


def redact_text(text: str) -> str:
    """Every ``scheme://user:password@`` in free text (a driver's error message) redacted."""
    return _USERINFO.sub(r"\g<scheme>:***@", text)
