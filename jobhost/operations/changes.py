"""The change log as operators read it, and a change's reason as every surface takes it in:
its whitespace folded and other control characters refused, as it is later printed on terminals.
"""

from __future__ import annotations

import re
from typing import Any

from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import JobChange

__all__ = [
    "REASON_LIMIT",
    "BadReason",
    "change_json",
    "change_line",
    "change_origin",
    "checked_reason",
    "printable",
]


def change_json(change: JobChange) -> dict[str, Any]:
    return {
        "id": change.id,
        "at": iso_utc(change.at),
        "actor": change.actor,
        "action": change.action,
        "job": change.job_name,
        "before": change.before,
        "after": change.after,
        "reason": change.reason,
        "surface": change.surface,
        "address": change.address,
    }


def change_origin(change: JobChange) -> str:
    """Where a change came from: ``cli``, ``api from 10.0.0.7``, ``dashboard from ...``; ``-``
    for the host's own and for changes logged before the surface was."""
    if change.surface is None:
        return "-"
    return f"{change.surface} from {change.address}" if change.address else change.surface


def change_line(change: JobChange) -> str:
    """``2026-12-01 09:12:03Z  alice (cli)  pause  nightly.billing: disk full``."""
    why = f": {change.reason}" if change.reason else ""
    subject = change.job_name
    if change.action.startswith("state-") and change.after is not None:
        # Which key: the job alone does not say what an operator changed.
        subject = f"{subject} {change.after.get('key')}"
    # Every part but the time is someone's text (a reason, a $USER): none may drive a terminal.
    who = f"{change.actor} ({change_origin(change)})"
    return printable(f"{short_utc(change.at)}  {who}  {change.action}  {subject}{why}")


REASON_LIMIT = 500
"""The longest reason, in characters, as given (the API document's ``maxLength``)."""

# C0 and C1 controls and DEL; whitespace among them is folded before this is looked for.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Tabs and line feeds are shown: they cannot rewrite a line (a carriage return can).
_SHOWN_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class BadReason(ValueError):
    """A reason that is empty, too long, or holds a control character; the message says which."""


def checked_reason(text: str) -> str:
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
    """Every control character but tab and line feed written as ``\\xNN``."""
    return _SHOWN_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
