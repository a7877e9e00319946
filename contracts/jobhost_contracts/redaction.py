"""Keeping credentials out of messages, and long messages short, for host and modules.

:func:`redact_text` replaces with ``***``, keeping the text around them:

- the password of every ``scheme://user:password@`` (a database URL in a driver's error);
- the value of an ``Authorization`` (or ``Proxy-Authorization``) header, after its scheme
  (``Authorization: Bearer ***``), in header, ``key=value`` and JSON forms;
- a ``Bearer`` token anywhere (8 characters or more, with a digit or a symbol in it);
- the value of a key whose name ends with ``password``, ``passwd``, ``passphrase``, ``pwd``,
  ``api_key`` / ``apikey`` / ``api-key``, ``token``, ``secret``, ``secret_key``,
  ``access_key`` or ``private_key``, in any case, written ``key=value`` (a query string, a
  libpq DSN), ``key: value`` or JSON / Python ``"key": "value"``; not a dotted name
  (``jobhost.job.vault.rotate-secret: done`` is a logger's name and its message);
- keys of well-known shapes: AWS access key ids (``AKIA…``, ``ASIA…``), Stripe (``sk_live_``,
  ``sk_test_``, ``rk_…``), GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
  ``github_pat_``), Slack (``xoxb-``, ``xoxa-``, ``xoxp-``...), Google API keys (``AIza…``) and
  JSON web tokens, whose recognisable start is kept (``AKIA***``);
- a ``-----BEGIN … PRIVATE KEY-----`` block, to its ``END`` line or the end of the text.

Every pattern runs in time linear in the text, whatever it holds: a job may fail with a
message of megabytes, and redacting it sits on the path every outcome takes to the ledger and
the log. (A single regular expression over the whole text backtracks over every run of letters
in search of ``://`` and takes minutes on a 300 kB message.) Text with none of the words the
patterns start from is returned after a few substring searches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["ERROR_TEXT_LIMIT", "bound_text", "hide_secrets", "may_hold_credentials", "redact_text"]

ERROR_TEXT_LIMIT = 4000
"""Characters of an error message kept in the ledger, the audit record and one log line."""

_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_USER = re.compile(r"[^:/@\s]*")
_WHITESPACE = re.compile(r"\s")


def redact_text(text: str) -> str:
    """``text`` with every credential the module names replaced by ``***``."""
    return _redact_credentials(_redact_url_passwords(text))


def hide_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (values a job read, which an answer may echo) replaced
    by ``***``; an empty one is ignored."""
    # Longest first, so a secret that contains a shorter one is hidden whole.
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def may_hold_credentials(text: str) -> bool:
    """False when ``text`` holds none of the words :func:`redact_text` starts from (then it
    has nothing to redact); a quick test for text on a hot path."""
    if "://" in text:
        return True
    lower = text.lower()
    return any(word in lower for word in _TRIGGERS)


_SECRET_KEY = (
    r"(?:password|passwd|passphrase|pwd|api[_-]?key|token|secret|secret[_-]?key|"
    r"access[_-]?key|private[_-]?key)"
)
_TOKEN_CHARS = r"[\w\-.~+/]"
_AUTHORIZATION = re.compile(
    r"(?<![\w-])(?P<keep>(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|digest|token|negotiate|ntlm|apikey)\s+)?)"
    r"(?P<secret>[^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(
    rf"(?P<keep>\bbearer\s+)(?P<secret>(?={_TOKEN_CHARS}*[\d\-.~+/_]){_TOKEN_CHARS}{{8,}}=*)",
    re.IGNORECASE,
)
# The key starts where no key character precedes it, so each run of them is tried once; a
# dotted name is a logger's or a module's (``jobhost.job.vault.rotate-secret: done``), not a key.
_KEY_VALUE = re.compile(
    rf"(?<![\w.-])(?P<keep>[\w-]*{_SECRET_KEY}[\"']?\s*[:=]\s*)"
    r"(?P<secret>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s\"'&;,<>(){}\[\]]+)",
    re.IGNORECASE,
)
_SHAPES = re.compile(
    r"\b(?P<keep>AKIA|ASIA)(?P<secret>[A-Z0-9]{16})\b"
    r"|\b(?P<keep2>[sr]k_(?:live|test)_)(?P<secret2>[A-Za-z0-9]{8,})"
    r"|\b(?P<keep3>gh[pousr]_)(?P<secret3>[A-Za-z0-9]{20,})"
    r"|\b(?P<keep4>github_pat_)(?P<secret4>\w{20,})"
    r"|\b(?P<keep5>xox[abposr]-)(?P<secret5>[A-Za-z0-9-]{8,})"
    r"|\b(?P<keep6>AIza)(?P<secret6>[\w-]{30,})"
    r"|\b(?P<keep7>eyJ)(?P<secret7>[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,})"
)
_PRIVATE_KEY = re.compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?:[^-]|-(?!----END ))*"
    r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY-----)?"
)
_TRIGGERS = (
    *("pass", "pwd", "key", "token", "secret", "auth", "bearer", "akia", "asia", "k_live_"),
    *("k_test_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "aiza", "eyj"),
    "-----begin",
)


def _redact_credentials(text: str) -> str:
    if not may_hold_credentials(text):
        return text
    text = _PRIVATE_KEY.sub(_private_key, text)
    text = _AUTHORIZATION.sub(_kept, text)
    text = _BEARER.sub(_kept, text)
    text = _KEY_VALUE.sub(_kept_quoted, text)
    return _SHAPES.sub(_shape, text)


def _kept(match: re.Match[str]) -> str:
    return f"{match['keep']}***"


def _kept_quoted(match: re.Match[str]) -> str:
    secret = match["secret"]
    quote = secret[0] if secret[0] in "\"'" and len(secret) > 1 else ""
    return f"{match['keep']}{quote}***{quote}"


def _shape(match: re.Match[str]) -> str:
    keep = next(value for name, value in match.groupdict().items() if name[:4] == "keep" and value)
    return f"{keep}***"


def _private_key(match: re.Match[str]) -> str:
    return f"{match['begin']}***{match['end'] or ''}"


def _redact_url_passwords(text: str) -> str:
    """The matches of ``[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\\s]*:[^@\\s]*@`` redacted, found from
    each ``://`` outwards, so that no character is looked at more than a few times."""
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
    """The next ``@`` and the next whitespace at or after a position that only moves forward,
    remembered, so a text of many ``x://u:p`` with no ``@`` stays linear."""

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
