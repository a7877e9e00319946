"""The dashboard's audit line: one JSON line per action, by the ``jobhost.audit`` logger.

The change log (``job_changes``) holds the action itself, written by the operator-action path;
this line adds where it came from (the client's address) for the host's log.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from jobhost.operations.timefmt import iso_utc

__all__ = ["audit"]

_audit = logging.getLogger("jobhost.audit")


def audit(*, action: str, subject: str, who: str, reason: str, client: str, result: str) -> None:
    """Log one dashboard action with who, what, on what, why, from where, and the result."""
    _audit.info(
        "%s",
        json.dumps(
            {
                "event": "console.action",
                "at": iso_utc(datetime.now(UTC)),
                "actor": who,
                "action": action,
                "job_name": subject,
                "reason": reason,
                "client": client,
                "result": result,
            },
            sort_keys=True,
        ),
    )
