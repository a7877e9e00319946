"""A reason, as every surface takes it in and writes it out.

A reason is audited and later printed on a terminal (``jobhost changes``, ``report --job``) and a
page. Whitespace runs (a textarea's line breaks included) are folded to one space; any other
control character is refused where the reason is given, so an escape sequence (``ESC]0;…BEL``
retitling a terminal, an ``ESC]8;;`` hyperlink) never reaches the change log. What an older
version stored is escaped when shown, by :func:`printable`.
"""

from __future__ import annotations

import re

__all__ = ["REASON_LIMIT", "BadReason", "checked_reason", "printable"]

REASON_LIMIT = 500
"""The longest reason, in characters, as given (the API document's ``maxLength``)."""

# C0 and C1 controls and DEL; whitespace among them is folded before this is looked for.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# On output, tabs and line breaks are kept: they move the cursor but cannot rewrite a line
# (a carriage return can) or start an escape sequence.
_SHOWN_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class BadReason(ValueError):
    """A reason that is empty, too long, or holds a control character; the message says which."""


def checked_reason(text: str) -> str:
    """``text`` with whitespace folded; :class:`BadReason` when longer than
    :data:`REASON_LIMIT`, blank, or holding a control character or a lone surrogate."""
    if len(text) > REASON_LIMIT:
        raise BadReason(f"must be at most {REASON_LIMIT} characters (got {len(text)})")
    folded = " ".join(text.split())
    if not folded:
        raise BadReason("say why, in a non-empty text: it is audited")
    found = _CONTROL.search(folded)
    if found is not None:
        raise BadReason(
            f"must not contain control characters (found U+{ord(found.group()):04X} at "
            f"character {found.start() + 1})"
        )
    if _SURROGATE.search(folded) is not None:
        raise BadReason("must not contain a lone surrogate (\\ud800-\\udfff)")
    return folded


def printable(text: str) -> str:
    """``text`` with every control character but tab and line feed written as ``\\xNN``, for a
    terminal."""
    return _SHOWN_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
