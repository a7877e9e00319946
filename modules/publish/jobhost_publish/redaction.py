"""Keeping a broker URL's credentials out of every message a failure carries."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from jobhost_contracts import redact_text, safe_url

__all__ = ["HIDDEN", "Redactor"]

HIDDEN = "***"


class Redactor:
    """Scrubs the URL's password and user (and the URL itself) from a client's error text,
    which may quote them; ``scheme://user:password@`` anywhere is redacted as well."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._url = url
        self._safe_url = safe_url(url)
        secrets = {parts.password or "", unquote(parts.password or "")}
        if parts.username and not parts.password:
            secrets.add(parts.username)  # nats://TOKEN@host: a user without password is a token
        # Longest first, so a secret that contains a shorter one is hidden whole.
        self._secrets = sorted((s for s in secrets if s), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        text = text.replace(self._url, self._safe_url)
        for secret in self._secrets:
            text = text.replace(secret, HIDDEN)
        return redact_text(text)
