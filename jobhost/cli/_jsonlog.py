"""The host's own log lines as JSON (``log_format = "json"``): one object a line on stderr.

Every line has ``time`` (UTC), ``level``, ``logger`` and ``message``; a line written while a job
runs (by the job, or by the host about it, from the run's context) also has ``job``, ``run_id``,
``attempt``, ``trace_id`` and ``span_id``, so a log pipeline joins it to the run's span and its
ledger row. A traceback is one field, ``exception``, never lines of its own. Passwords in URLs
are redacted as in the text format.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from jobhost.config import bound_text, redact_text
from jobhost.envelope.runlog import current_run

__all__ = ["JsonLogFormatter"]

_TRACEBACK_LIMIT = 64_000


class JsonLogFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        fields: dict[str, Any] = {
            "time": f"{stamp:%Y-%m-%dT%H:%M:%S}.{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": bound_text(redact_text(record.getMessage())),
        }
        run = current_run()
        if run is not None:
            fields.update(job=run.job_name, run_id=run.run_id, attempt=run.attempt)
            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                fields["trace_id"] = format(context.trace_id, "032x")
                fields["span_id"] = format(context.span_id, "016x")
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            fields["exception"] = bound_text(redact_text(record.exc_text), _TRACEBACK_LIMIT)
        if record.stack_info:
            fields["stack"] = bound_text(redact_text(record.stack_info), _TRACEBACK_LIMIT)
        return json.dumps(fields, ensure_ascii=False, default=str)
