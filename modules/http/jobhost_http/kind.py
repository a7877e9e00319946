"""Kind ``http``: the call of one ``[[modules.http.jobs]]`` entry, for jobs created at run time.

:class:`HttpCallModel` is the published schema of the call's keys; the settings file's entry
reader then checks the rest, so a call is held to the same rules wherever it is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from jobhost_contracts import JobKind, KindSettingsError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobhost_http.call import HttpCall
from jobhost_http.settings import SECTION, HttpJobSettings, parse_jobs

__all__ = ["CREDENTIAL_HEADERS", "HttpCallModel", "http_kind"]

CREDENTIAL_HEADERS = frozenset(
    {
        *("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"),
        *("x-auth-token", "private-token"),
    }
)
"""Headers a runtime job may set only through ``secret_headers`` (compared lower-case, with
``_`` read as ``-``)."""
CREDENTIAL_KEYS = frozenset(
    {"password", "passwd", "secret", "token", "api-key", "apikey", "access-token"}
)
"""Query parameters and JSON body keys (compared the same way) that hold a credential."""

_PLACEHOLDER_NAME = "http.kind-settings"
_SECRET_EXAMPLE = 'secret_headers = {"Authorization": "JOBHOST_RUNTIME_SECRET_HOOK_AUTH"}'


class HttpCallModel(BaseModel):
    """One HTTP call. Secrets go in ``secret_headers`` as environment variable names."""

    model_config = ConfigDict(extra="forbid", strict=True, title="http")

    url: str = Field(description="http:// or https:// URL to call.", min_length=1)
    method: str = Field("GET", description="GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Plain header name = value (no credentials here)."
    )
    secret_headers: dict[str, str] = Field(
        default_factory=dict,
        description="Header name = NAME of an environment variable holding its value, read "
        "at call time; the value is never stored.",
    )
    body: str | None = Field(None, description="Request body, sent as it is.")
    timeout: str = Field("30s", description="How long the call may take, e.g. '10s'.")
    expect_status: list[int] | None = Field(
        None, description="Statuses that count as success; default: any 2xx."
    )


def http_kind() -> JobKind:
    return JobKind(
        name="http",
        description="Call an HTTP endpoint; success is a 2xx (or one of expect_status).",
        settings_schema=HttpCallModel.model_json_schema(),
        validate=validate_call,
        factory=lambda name, job: HttpCall(job.model_copy(update={"name": name}), quote_body=None),
        module=SECTION,
        examples=(
            {
                "method": "POST",
                "url": "https://example.com/hooks/nightly",
                "secret_headers": {"Authorization": "JOBHOST_RUNTIME_SECRET_HOOK_AUTH"},
            },
        ),
        secret_variables=lambda job: {
            f"secret_headers.{header}": name for header, name in job.secret_headers.items()
        },
    )


def validate_call(settings: Mapping[str, Any]) -> HttpJobSettings:
    try:
        model = HttpCallModel.model_validate(dict(settings))
    except ValidationError as error:
        raise KindSettingsError.first_of(error, HttpCallModel.model_fields) from None
    _refuse_plain_credentials(model)
    entry: dict[str, Any] = model.model_dump(exclude_none=True)
    entry |= {"name": _PLACEHOLDER_NAME, "interval": "1h"}
    try:
        (job,) = parse_jobs({"jobs": [entry]})
    except ValueError as error:
        text = str(error).split(": ", 1)[-1]
        key = text.split(" ", 1)[0].split(".", 1)[0]
        raise KindSettingsError(key if key in HttpCallModel.model_fields else "", text) from None
    return job


def _refuse_plain_credentials(model: HttpCallModel) -> None:
    # A runtime job's settings are shown to every ``read`` token.
    parts = urlsplit(model.url)
    if parts.password is not None or (parts.username and "@" in parts.netloc):
        raise KindSettingsError(
            "url",
            "carries credentials (user:password@); remove them and send them in a header "
            f"named in secret_headers, e.g. {_SECRET_EXAMPLE}",
        )
    for key, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _plain(key) in CREDENTIAL_KEYS:
            raise KindSettingsError(
                "url",
                f"has a credential in its query ({key}=...) and would be shown to every "
                f"reader; remove it and send it in a header named in secret_headers, e.g. "
                f"{_SECRET_EXAMPLE}",
            )
    for header in model.headers:
        if _plain(header) in CREDENTIAL_HEADERS:
            raise KindSettingsError(
                f"headers.{header}",
                f"is a credential and would be shown to every reader; move it to "
                f'secret_headers, naming an environment variable: {{"{header}": '
                f'"JOBHOST_RUNTIME_SECRET_..."}}',
            )
    for key in _body_keys(model.body):
        if _plain(key) in CREDENTIAL_KEYS:
            raise KindSettingsError(
                "body",
                f"has a credential under key {key!r} and would be shown to every reader; remove it "
                f"and let the endpoint authenticate by a header named in secret_headers, e.g. "
                f"{_SECRET_EXAMPLE}",
            )


def _plain(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _body_keys(body: str | None) -> Iterator[str]:
    if not body:
        return
    try:
        document = json.loads(body)
    except ValueError:
        return
    pending: list[Any] = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            yield from (str(key) for key in value)
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
