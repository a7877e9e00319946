"""Keeping credentials out of output, logs and errors: the patterns every module's text is
redacted by (:func:`jobhost_contracts.redact_text`), and the operator's own
(``redact_patterns``), which :func:`load_settings` installs for the process."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from jobhost_contracts import bound_text
from jobhost_contracts import redact_text as _redact_known
from jobhost_contracts.redaction import ERROR_TEXT_LIMIT, may_hold_credentials
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = [
    "RedactingFormatter",
    "bound_text",
    "compile_redact_pattern",
    "needs_redaction",
    "redact_text",
    "redact_url",
    "use_redact_patterns",
]

_operators: list[re.Pattern[str]] = []


def compile_redact_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a ``redact_patterns`` entry; :class:`ValueError` saying why not."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        where = f" at position {error.pos}" if error.pos is not None else ""
        raise ValueError(f"{pattern!r} is not a regular expression: {error.msg}{where}") from None
    if compiled.match(""):
        raise ValueError(f"{pattern!r} matches the empty text: it would redact nothing useful")
    return compiled


def use_redact_patterns(patterns: Sequence[str]) -> None:
    """Redact what ``patterns`` match from now on, in this process, beside the known shapes."""
    _operators[:] = [compile_redact_pattern(pattern) for pattern in patterns]


def redact_text(text: str) -> str:
    """``text`` without the credentials :func:`jobhost_contracts.redact_text` knows, nor what
    the operator's ``redact_patterns`` match (all of a match, or its group ``secret``)."""
    text = _redact_known(text)
    for pattern in _operators:
        text = pattern.sub(_hidden, text)
    return text


def needs_redaction(text: str) -> bool:
    """False when :func:`redact_text` would return ``text`` unchanged for sure."""
    return bool(_operators) or may_hold_credentials(text)


def _hidden(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex or match.start("secret") < 0:
        return "***"
    whole = match[0]
    start, end = match.start("secret") - match.start(), match.end("secret") - match.start()
    return f"{whole[:start]}***{whole[end:]}"


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``; unparsable text is redacted by pattern."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return redact_text(url)


class RedactingFormatter(logging.Formatter):
    """Log lines with every credential redacted (a driver error quotes its URL in the message
    and the traceback) and each line cut at :data:`ERROR_TEXT_LIMIT` characters."""

    def format(self, record: logging.LogRecord) -> str:
        text = redact_text(super().format(record))
        if len(text) <= ERROR_TEXT_LIMIT:
            return text
        return "\n".join(bound_text(line) for line in text.split("\n"))
