"""Host settings: the validated model, how it is loaded, and what never gets printed."""

from __future__ import annotations

from jobhost_contracts import format_duration

from jobhost.config.loading import CONFIG_ENV, load_settings, refusal, short_repr
from jobhost.config.redaction import RedactingFormatter, bound_text, redact_text, redact_url
from jobhost.config.settings import (
    GROUP_NAME,
    LEASE_HEARTBEATS,
    MAX_DURATION,
    RUNTIME_SECRET_PREFIX,
    ApiToken,
    JobOverride,
    Settings,
)

__all__ = [
    "CONFIG_ENV",
    "GROUP_NAME",
    "LEASE_HEARTBEATS",
    "MAX_DURATION",
    "RUNTIME_SECRET_PREFIX",
    "ApiToken",
    "JobOverride",
    "RedactingFormatter",
    "Settings",
    "bound_text",
    "format_duration",
    "load_settings",
    "redact_text",
    "redact_url",
    "refusal",
    "short_repr",
]
