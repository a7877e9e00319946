"""Keeping database passwords out of output, logs and errors."""

from __future__ import annotations

import logging

from jobhost_contracts import bound_text, redact_text
from jobhost_contracts.redaction import ERROR_TEXT_LIMIT
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["RedactingFormatter", "bound_text", "redact_text", "redact_url", "storable_text"]


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``; unparsable text is redacted by pattern."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return redact_text(url)


def storable_text(message: str | None, limit: int = ERROR_TEXT_LIMIT) -> str | None:
    """A job's text as the ledger and the run log keep it: passwords redacted, cut to ``limit``
    characters (the length kept), NUL and lone surrogates spelled out, since PostgreSQL or the
    driver refuse them and a run's record must never be lost to the characters of its text."""
    if not message:
        return None
    text = bound_text(redact_text(message), limit)
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class RedactingFormatter(logging.Formatter):
    """Log lines with every URL password redacted and every line bounded, tracebacks included.

    A job's exception message is the executor's own text: a driver error quoting its connection
    URL reaches the log through ``%(message)s`` and again in the traceback's last line. Each line
    is cut at :data:`ERROR_TEXT_LIMIT` characters (saying how long it was), so a megabyte message
    costs a bounded line, while the traceback's frames stay whole.
    """

    def format(self, record: logging.LogRecord) -> str:
        text = redact_text(super().format(record))
        if len(text) <= ERROR_TEXT_LIMIT:
            return text
        return "\n".join(bound_text(line) for line in text.split("\n"))
