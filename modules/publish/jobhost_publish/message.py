"""What a consumer receives: the body and the idempotency key, the same on both brokers.

The body is the job's ``payload`` object with four fields added by the host (documented in
docs/operations/publish.md, which consumers rely on)::

    {"kind": "close-day", "job": "billing.close-day", "occurrence": "2026-12-01T01:00:00Z",
     "run_id": "0193…", "attempt": 1}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from jobhost_contracts import JobContext

__all__ = ["CONTENT_TYPE", "body", "occurrence_text"]

CONTENT_TYPE = "application/json"


def occurrence_text(occurrence: datetime | None) -> str | None:
    """The scheduled instant in UTC as ISO 8601 with ``Z``; None for a manual run."""
    if occurrence is None:
        return None
    return occurrence.astimezone(UTC).isoformat().replace("+00:00", "Z")


def body(context: JobContext, payload: Mapping[str, Any]) -> bytes:
    """The message body: UTF-8 JSON, the payload's fields first, then the host's."""
    document = {
        **payload,
        "job": context.job_name,
        "occurrence": occurrence_text(context.occurrence),
        "run_id": context.run_id,
        "attempt": context.attempt,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
