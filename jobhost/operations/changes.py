"""The change log as operators read it: one JSON shape for ``jobhost changes --json`` and
``GET /api/v1/changes``, and one line of text per change."""

from __future__ import annotations

from typing import Any

from jobhost.operations.reasons import printable
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import JobChange

__all__ = ["change_json", "change_line", "change_origin"]


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
