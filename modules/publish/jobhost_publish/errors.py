"""Why a publish failed: returned as ``Failure`` for the retry policy to deal with, saying what
to do, without the broker URL's credentials (:class:`Redactor`)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import unquote, urlsplit

from jobhost_contracts import hide_secrets, redact_text, safe_url

__all__ = [
    "BrokerUnavailable",
    "MissingUrl",
    "NoStream",
    "NotAcknowledged",
    "PublishError",
    "Redactor",
    "Rejected",
    "Unroutable",
]


class PublishError(Exception):
    """The broker did not take the message; nothing was confirmed."""

    def __init__(self, job: str, message: str) -> None:
        super().__init__(f"{job}: {message}")


class MissingUrl(PublishError):
    def __init__(self, job: str, variable: str, setting: str) -> None:
        super().__init__(
            job,
            f"environment variable {variable} (named by [modules.publish] {setting}) is not set "
            "or empty; no message was sent",
        )


class BrokerUnavailable(PublishError):
    """No connection: refused, unreachable, closed, credentials refused, bad URL."""

    def __init__(self, job: str, broker: str, reason: str) -> None:
        super().__init__(job, f"{broker} unavailable: {reason}; no message was confirmed")


class NotAcknowledged(PublishError):
    """The broker did not confirm in time: the message may or may not be stored, so a retry
    sends it again with the same idempotency key."""

    def __init__(self, job: str, destination: str, timeout: timedelta) -> None:
        super().__init__(
            job,
            f"{destination}: no acknowledgement within {timeout.total_seconds():g}s "
            "(the timeout setting); a retry reuses the same idempotency key",
        )


class NoStream(PublishError):
    def __init__(self, job: str, subject: str) -> None:
        super().__init__(
            job,
            f"no JetStream stream captures subject {subject!r}, so nothing would store the "
            f"message; create one, e.g. `nats stream add BILLING --subjects '{subject}'`, or "
            "add the subject to an existing stream's subjects",
        )


class Unroutable(PublishError):
    def __init__(self, job: str, destination: str, reply: str) -> None:
        super().__init__(
            job,
            f"{destination}: unroutable, RabbitMQ returned it ({reply}): no queue is bound for "
            "this routing key; declare the queue and bind it to the exchange (with the default "
            "exchange, name the queue as the routing key)",
        )


class Rejected(PublishError):
    """The broker answered and refused: a negative acknowledgement, a missing exchange, a
    JetStream API error."""

    def __init__(self, job: str, destination: str, reason: str) -> None:
        super().__init__(job, f"{destination}: refused: {reason}")


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
        self._secrets = secrets

    def __call__(self, text: str) -> str:
        return redact_text(hide_secrets(text.replace(self._url, self._safe_url), self._secrets))
