"""Keeping passwords in URLs out of messages, and long messages short, for host and modules.

:func:`redact_text` runs in time linear in the text, whatever it holds: a job may fail with a
message of megabytes, and redacting it sits on the path every outcome takes to the ledger and
the log. (A single regular expression over the whole text backtracks over every run of letters
in search of ``://`` and takes minutes on a 300 kB message.)
"""

from __future__ import annotations

import re

__all__ = ["ERROR_TEXT_LIMIT", "bound_text", "redact_text"]

ERROR_TEXT_LIMIT = 4000
"""Characters of an error message kept in the ledger, the audit record and one log line."""

_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_USER = re.compile(r"[^:/@\s]*")
_WHITESPACE = re.compile(r"\s")


def redact_text(text: str) -> str:
    """Every ``scheme://user:password@`` in free text (a driver's error message) redacted.

    The same matches as ``[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\\s]*:[^@\\s]*@``, found from each
    ``://`` outwards, so that no character is looked at more than a few times.
    """
    if "://" not in text:
        return text
    pieces: list[str] = []
    kept = 0  # text[:kept] is already in pieces
    finder = _NextIndex(text)
    marker = text.find("://")
    while marker != -1:
        end = _userinfo_end(text, marker, finder)
        if end is None:
            marker = text.find("://", marker + 3)
            continue
        password_start, at = end
        pieces.append(text[kept:password_start])
        pieces.append("***")
        kept = at
        marker = text.find("://", at)
    pieces.append(text[kept:])
    return "".join(pieces)


def bound_text(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was; short text unchanged."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text)} characters in all]"


class _NextIndex:
    """The next ``@`` and the next whitespace at or after a position that only moves forward.

    Remembering the last answer keeps a text of many ``x://u:p`` with no ``@`` linear: each
    search resumes where the previous one found nothing closer.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = -2  # -2: not searched yet; -1: none left
        self._space = -2

    def at_sign(self, start: int) -> int:
        if self._at == -2 or (self._at != -1 and self._at < start):
            self._at = self._text.find("@", start)
        return self._at

    def whitespace(self, start: int) -> int:
        if self._space == -2 or (self._space != -1 and self._space < start):
            found = _WHITESPACE.search(self._text, start)
            self._space = found.start() if found else -1
        return self._space


def _userinfo_end(text: str, marker: int, finder: _NextIndex) -> tuple[int, int] | None:
    """(start of the password, index of its ``@``) for the ``://`` at ``marker``, or None."""
    # A scheme: scheme characters right before ``://``, at least one of them a letter. The walk
    # back stops at ':' or '/', so it never crosses an earlier ``://``.
    start = marker
    while start > 0 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
        if text[start].isalpha():
            break
    else:
        return None
    # The user: up to the first ':' with none of '/', '@' or whitespace before it.
    user = _USER.match(text, marker + 3)
    assert user is not None  # the pattern matches the empty string
    if text[user.end() : user.end() + 1] != ":":
        return None
    password_start = user.end() + 1
    at = finder.at_sign(password_start)
    if at == -1:
        return None
    space = finder.whitespace(password_start)
    if space != -1 and space < at:
        return None
    return password_start, at
