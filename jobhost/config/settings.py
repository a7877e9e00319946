"""The host's settings: one validated model, read from ``jobhost.toml`` and ``JOBHOST_*``; each
field's type carries its check (what is wrong and what to write instead: API tokens, operator
tokens and ``[jobs."NAME"]`` overrides included), the model the rules across fields."""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, get_origin
from urllib.parse import urlsplit

from jobhost_contracts import DstGap, DstRepeat, format_duration, parse_duration
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from jobhost.config.redaction import compile_redact_pattern, redact_text, redact_url

__all__ = [
    "GROUP_NAME",
    "LEASE_HEARTBEATS",
    "MAX_DURATION",
    "RUNTIME_SECRET_PREFIX",
    "ApiToken",
    "JobOverride",
    "Settings",
    "split_listen_address",
]

LEASE_HEARTBEATS = 2
"""A lease must span at least this many heartbeats, so one late heartbeat never loses a live
run's lease to another replica (which would then run the job beside it)."""
RUNTIME_SECRET_PREFIX = "JOBHOST_RUNTIME_SECRET_"
HOST_VARIABLES = ("JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS")  # read, but no settings
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Longer durations overflow date arithmetic long before they mean anything: always a typo.
MAX_DURATION = timedelta(days=365)

GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")

_LISTEN = re.compile(r"^(?P<host>[^\s:]*|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})$")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MIN_TOKEN = 16


def _whole_number(value: object) -> object:
    # pydantic takes true for 1; a flag where a count belongs is a mistake worth naming.
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be positive: a duration greater than 0, e.g. '30s'")
    return _not_negative(value)


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("must not be negative, e.g. '30m' (0s: no grace)")
    if value > MAX_DURATION:
        raise ValueError("must be at most 365d")
    return value


def _store_timeout(value: timedelta) -> timedelta:
    if value < timedelta(0) or value > timedelta(hours=1):
        raise ValueError("must be between 0 (off) and 1h, e.g. '10s'")
    return value


def _small_offset(value: timedelta) -> timedelta:
    if abs(value) > timedelta(days=1):
        raise ValueError("must be within one day either way, e.g. '20s' or '-20s'")
    return value


def _host_id(value: str | None) -> str | None:
    if value == "":
        return None  # JOBHOST_HOST_ID= in an environment file means "not set"
    if value is not None and (not value.strip() or len(value) > 200):
        raise ValueError("must be 1 to 200 characters, or unset for a generated id")
    return value


def _listen_address(value: str | None) -> str | None:
    if not value:
        return None
    split_listen_address(value)
    return value


def _level(value: str) -> str:
    upper = value.upper()
    if upper not in _LEVELS:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
    return upper


def _database_url(value: str) -> str:
    backend = _backend(value)
    if backend is None:
        raise ValueError(
            "is not a database URL; use e.g. 'sqlite:///jobhost.db' or "
            "'postgresql+psycopg://user@host/db'"
        )
    # postgres:// is how PaaS and libpq tools write it; the engine gives it psycopg 3 too.
    if backend not in {"sqlite", "postgresql", "postgres"}:
        raise ValueError("must be an SQLite or PostgreSQL URL")
    return value


def _postgres_url(value: str | None) -> str | None:
    if not value:
        return None
    if _backend(value) != "postgresql":
        raise ValueError(
            "must be a PostgreSQL URL, e.g. 'postgresql+psycopg://user@db.internal:5432/db'"
        )
    return value


def _backend(value: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(value).get_backend_name()
    except ArgumentError:
        return None


def _session_secret(value: SecretStr | None) -> SecretStr | None:
    if value is None or not value.get_secret_value():
        return None  # JOBHOST_SESSION_SECRET= means "not set"
    if len(value.get_secret_value()) < 32:
        raise ValueError(
            "must be at least 32 characters, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return value


def _dashboard_url(value: str | None) -> str | None:
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(
            "must be the dashboard's http(s) URL without a query, e.g. "
            "'https://jobhost.example.com' or 'https://ops.example.com/jobhost'"
        )
    if any(c.isspace() or c in "\"'{}<>" for c in value) or len(value) > 500:
        raise ValueError("must be a URL of at most 500 characters without spaces or quotes")
    # Alert templates append /jobs/NAME: a trailing slash would double it.
    return value.rstrip("/")


def _group_names(value: dict[str, int]) -> dict[str, int]:
    for name in value:
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(
                f"group name {name!r} must be 1 to 100 lower-case letters, digits, '.', "
                "'_' or '-', starting with a letter or digit, e.g. warehouse = 2"
            )
    return value


def _proxy_address(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address or network: give e.g. '10.0.0.5' or '10.0.0.0/8'"
        ) from None


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
Grace = Annotated[Duration, AfterValidator(_not_negative)]
StoreTimeout = Annotated[Duration, AfterValidator(_store_timeout)]
ClockOffset = Annotated[Duration, AfterValidator(_small_offset)]
WholeNumber = Annotated[int, BeforeValidator(_whole_number)]
_Slots = Annotated[WholeNumber, Field(ge=1, le=100_000)]
GroupLimits = Annotated[dict[str, _Slots], AfterValidator(_group_names)]
HostId = Annotated[str | None, AfterValidator(_host_id)]
DashboardUrl = Annotated[str | None, AfterValidator(_dashboard_url)]
ListenAddress = Annotated[str | None, AfterValidator(_listen_address)]
LogLevel = Annotated[str, AfterValidator(_level)]
DatabaseUrl = Annotated[str, AfterValidator(_database_url)]
PostgresUrl = Annotated[str | None, AfterValidator(_postgres_url)]
SessionSecret = Annotated[SecretStr | None, AfterValidator(_session_secret)]
ProxyAddress = Annotated[str, AfterValidator(_proxy_address)]


def is_loopback(host: str) -> bool:
    """True for a loopback address (127.0.0.0/8, ::1) or the name localhost."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_listen_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host is every address) as a pair;
    :class:`ValueError` saying the expected form otherwise."""
    match = _LISTEN.match(value)
    if not match or not 0 < int(match["port"]) < 65536:
        raise ValueError("must be HOST:PORT, e.g. '0.0.0.0:8080' or '127.0.0.1:9100'")
    return match["host"].strip("[]") or "0.0.0.0", int(match["port"])


class JobOverride(BaseModel):
    """A deployment's change to one job, under ``[jobs."module.job-name"]``: each field is the
    :class:`jobhost_contracts.JobPolicies` policy of its name, None keeping the declaration's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    cron: str | None = None
    interval: Duration | None = None
    timezone: str | None = None
    dst_gap: DstGap | None = None
    dst_repeat: DstRepeat | None = None
    concurrency_group: str | None = None


ApiScope = Literal["read", "write", "trigger"]


class ApiToken(BaseModel):
    """One ``[[api_tokens]]`` entry: who, the SHA-256 of the secret, and what it may do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    sha256: str
    scopes: list[ApiScope] = Field(min_length=1)

    @field_validator("sha256")
    @classmethod
    def _digest(cls, value: str) -> str:
        digest = value.strip().lower()
        if not _SHA256.fullmatch(digest):
            raise ValueError(
                "must be the SHA-256 of the secret as 64 hex digits, e.g. the first word of "
                '`printf %s "$SECRET" | sha256sum`; never the secret itself'
            )
        return digest


def _unique_api_tokens(value: list[ApiToken]) -> list[ApiToken]:
    seen: set[str] = set()
    for token in value:
        if token.name in seen:
            raise ValueError(f"two API tokens are named {token.name!r}; names are unique")
        if token.sha256 in {t.sha256 for t in value if t is not token}:
            raise ValueError(f"API token {token.name!r} has the same secret as another")
        seen.add(token.name)
    return value


def _operator_tokens(value: dict[str, str]) -> dict[str, str]:
    for name, token in value.items():
        if not name.strip():
            raise ValueError("an operator name must not be empty")
        if len(token) < _MIN_TOKEN:
            raise ValueError(
                f"the token of operator {name!r} is too short: use at least {_MIN_TOKEN} "
                "random characters (e.g. `python3 -c 'import secrets; "
                "print(secrets.token_urlsafe())'`)"
            )
    return value


ApiTokens = Annotated[list[ApiToken], AfterValidator(_unique_api_tokens)]
OperatorTokens = Annotated[dict[str, str], AfterValidator(_operator_tokens)]


class Settings(BaseSettings):
    """Every host setting (``docs/operations/settings.md``, held to this model by
    ``tests/docs``). Environment variables ``JOBHOST_<NAME>`` win over the file."""

    model_config = SettingsConfigDict(
        env_prefix="JOBHOST_", extra="forbid", frozen=True, validate_default=True
    )

    database_url: DatabaseUrl = "sqlite:///jobhost.db"
    store_connect_timeout: StoreTimeout = timedelta(seconds=10)
    store_statement_timeout: StoreTimeout = timedelta(seconds=60)
    store_pooling: Literal["none", "transaction"] = "none"
    store_listen_url: PostgresUrl = None
    poll_interval: PositiveDuration = timedelta(minutes=5)
    lease_duration: PositiveDuration = timedelta(seconds=60)
    heartbeat_interval: PositiveDuration = timedelta(seconds=5)
    worker_pool_size: WholeNumber = Field(8, ge=1, le=1024)
    host_id: HostId = None
    plugins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    http_listen: ListenAddress = None
    trusted_proxies: Annotated[list[ProxyAddress], NoDecode] = Field(default_factory=list)
    http_request_timeout: PositiveDuration = timedelta(seconds=30)
    http_header_timeout: PositiveDuration = timedelta(seconds=5)
    http_body_timeout: PositiveDuration = timedelta(seconds=10)
    http_concurrency: WholeNumber = Field(4, ge=1, le=64)
    console_actions: bool = False
    operator_tokens: OperatorTokens = Field(default_factory=dict)
    api_tokens: ApiTokens = Field(default_factory=list)
    web_read_access: Literal["open", "token"] | None = None
    session_secret: SessionSecret = None
    metrics_access: Literal["open", "token"] = "open"
    runtime_secret_env_prefix: str = RUNTIME_SECRET_PREFIX
    runtime_secrets_allowed: list[str] = Field(default_factory=list)
    api_body_limit: WholeNumber = Field(65_536, ge=1024, le=16_777_216)
    backfill_limit: WholeNumber = Field(10_000, ge=1)
    shutdown_grace: PositiveDuration = timedelta(seconds=30)
    audit_sink_timeout: PositiveDuration = timedelta(seconds=5)
    auto_migrate: bool = True
    overdue_grace: Grace = timedelta(minutes=30)
    max_schedule_lag: PositiveDuration = timedelta(seconds=60)
    metrics_job_label: bool = True
    dashboard_url: DashboardUrl = None
    metrics_refresh: PositiveDuration = timedelta(seconds=15)
    log_level: LogLevel = "INFO"
    log_format: Literal["text", "json"] = "text"
    run_log_lines: WholeNumber = Field(1000, ge=2, le=1_000_000)
    run_log_bytes: WholeNumber = Field(262_144, ge=1024, le=1_073_741_824)
    redact_patterns: list[str] = Field(default_factory=list)
    clock_offset: ClockOffset = timedelta(0)
    jobs: dict[str, JobOverride] = Field(default_factory=dict)
    concurrency_limits: GroupLimits = Field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = Field(default_factory=dict)
    _file: str | None = PrivateAttr(None)  # the file read, set by load_settings

    @property
    def file_read(self) -> str | None:
        """The name of the settings file read, or None when none was named."""
        return self._file

    def module_source(self, environ: Mapping[str, str]) -> str:
        """Where ``[modules.SECTION]`` was written, for a message about it."""
        if any(name.upper() == "JOBHOST_MODULES" for name in environ):
            return "environment JOBHOST_MODULES"
        if self._file is not None:
            return f"in {self._file}"
        return "in the configuration"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's contents arrive as init arguments; the environment must win over them.
        # Variables under the runtime secret prefix are secrets handed to jobs, never settings.
        chosen = getattr(init_settings, "init_kwargs", {}).get("runtime_secret_env_prefix")
        prefixes = {RUNTIME_SECRET_PREFIX, *([chosen] if isinstance(chosen, str) else [])}
        environment = _EnvWithoutSecrets(settings_cls, prefixes)
        return (environment, _FileUnderEnvironment(settings_cls, init_settings, environment))

    def warnings(self) -> list[str]:
        """Settings that are valid but do not do what they seem to."""
        found = unknown_variables(os.environ, self.runtime_secret_env_prefix)
        if self.api_tokens and not self.http_listen:
            found.append(
                "api_tokens is set but http_listen is not: jobhost run serves no API for them; "
                "set http_listen (e.g. '0.0.0.0:8080'), or serve the API with jobhost serve"
            )
        if self._file is None and Path("jobhost.toml").is_file():
            # Only a named file is read, so a stray one never changes a host: say this one was not.
            found.append(
                "jobhost.toml in the working directory is not read: a settings file is read only "
                "when named; add --config jobhost.toml (or set JOBHOST_CONFIG=jobhost.toml)"
            )
        return found

    def store_options(self, shortest_lease: timedelta | None = None) -> StoreOptions:
        """The store engine's timeouts (in seconds) and pooling, as :func:`create_store_engine`
        takes them; ``shortest_lease`` is the shortest a job of the process declares, if any."""
        # A transaction idle for a whole (shortest) lease belongs to a frozen process whose
        # claims are lost: ended, its row locks no longer hide its runs from the others.
        idle = self.lease_duration
        if shortest_lease is not None:
            idle = min(idle, shortest_lease)
        return {
            "connect_timeout": self.store_connect_timeout.total_seconds(),
            "statement_timeout": self.store_statement_timeout.total_seconds(),
            "idle_transaction_timeout": idle.total_seconds(),
            "pooling": self.store_pooling,
            "listen_url": self.store_listen_url,
        }

    def listen_address(self) -> tuple[str, int] | None:
        """``http_listen`` split into host and port, or None when HTTP is off."""
        return None if self.http_listen is None else split_listen_address(self.http_listen)

    def read_access_for(self, host: str) -> Literal["open", "token"]:
        """``web_read_access``, or when unset what a listener on ``host`` gets: open on a
        loopback address, token on any other (a wildcard address included)."""
        return self.web_read_access or ("open" if is_loopback(host) else "token")

    @field_validator("plugins", "trusted_proxies", mode="before")
    @classmethod
    def _split_plugins(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("runtime_secret_env_prefix")
    @classmethod
    def _secret_prefix(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "must be the start of an environment variable name (letters, digits, _), "
                f"e.g. {RUNTIME_SECRET_PREFIX!r}"
            )
        taken = [name for name in setting_variables() if name.upper().startswith(value.upper())]
        if taken:
            raise ValueError(
                f"would hand setting variables to runtime jobs ({', '.join(taken[:3])}); choose "
                f"a prefix no setting's variable starts with, e.g. {RUNTIME_SECRET_PREFIX!r}"
            )
        return value

    @field_validator("redact_patterns")
    @classmethod
    def _redact_patterns(cls, value: list[str]) -> list[str]:
        problems: list[str] = []
        for pattern in value:
            try:
                compile_redact_pattern(pattern)
            except ValueError as error:
                problems.append(str(error))
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("runtime_secrets_allowed")
    @classmethod
    def _allowed_secrets(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            # Every setting's variable starts so, and the host's own (JOBHOST_CONFIG) too.
            if name.upper().startswith("JOBHOST_"):
                raise ValueError(
                    f"{name} is a jobhost variable; runtime jobs never read the host's "
                    "settings: give the secret a variable of its own"
                )
        return value

    @model_validator(mode="after")
    def _lease_outlasts_heartbeats(self) -> Settings:
        least = self.heartbeat_interval * LEASE_HEARTBEATS
        if self.lease_duration < least:
            heartbeat = format_duration(self.heartbeat_interval)
            raise ValueError(
                f"lease_duration ({format_duration(self.lease_duration)}) must be at least "
                f"{LEASE_HEARTBEATS}x heartbeat_interval ({heartbeat}), i.e. at least "
                f"{format_duration(least)}: a lease renewed every heartbeat must not expire "
                "before the next one, or another replica takes a live run's job over; "
                f"raise lease_duration to {format_duration(least)} or more, or lower "
                "heartbeat_interval"
            )
        return self

    def __repr_args__(self) -> Any:
        # The database password (and any in a module's section) never reaches a log or a repr.
        for name, value in super().__repr_args__():
            if name in {"database_url", "store_listen_url"} and isinstance(value, str):
                yield name, redact_url(value)
            elif name == "modules":
                yield name, _Redacted(repr(value))
            else:
                yield name, value


class StoreOptions(TypedDict):
    connect_timeout: float
    statement_timeout: float
    idle_transaction_timeout: float
    pooling: Literal["none", "transaction"]
    listen_url: str | None


_TOOLING_PREFIXES = ("JOBHOST_TEST_", "JOBHOST_BENCH_")  # jobhost's tests and benchmarks


def unknown_variables(environ: Mapping[str, str], secret_prefix: str) -> list[str]:
    """A warning for every ``JOBHOST_*`` variable no setting reads, naming the closest one (not
    a refusal: an environment carries variables of older versions)."""
    known = setting_variables()
    skipped = (RUNTIME_SECRET_PREFIX, secret_prefix.upper(), *_TOOLING_PREFIXES)
    found: list[str] = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("JOBHOST_") or upper in known or upper.startswith(skipped):
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        found.append(
            f"environment variable {name} is not a jobhost setting and is ignored{hint} "
            "(see docs/operations/settings.md)"
        )
    return found


def setting_variables() -> list[str]:
    """Every environment variable the host reads as a setting (but the secret prefix's own,
    read from the file only)."""
    names = [
        f"JOBHOST_{name.upper()}"
        for name in Settings.model_fields
        if name != "runtime_secret_env_prefix"
    ]
    return [*names, *HOST_VARIABLES]


class _Redacted:
    """Text shown as it is in a repr, after redaction."""

    def __init__(self, text: str) -> None:
        self._text = redact_text(text)

    def __repr__(self) -> str:
        return self._text


class _EnvWithoutSecrets(EnvSettingsSource):
    """The ``JOBHOST_*`` environment, without the variables meant for runtime jobs."""

    def __init__(self, settings_cls: type[BaseSettings], prefixes: set[str]) -> None:
        self._prefixes = tuple(prefix.lower() for prefix in prefixes)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        found = super()._load_env_vars()
        return {k: v for k, v in found.items() if not k.lower().startswith(self._prefixes)}


class _FileUnderEnvironment(PydanticBaseSettingsSource):
    """The file's settings, without the tables the environment gives: they replace the file's
    whole (merged key by key, ``JOBHOST_OPERATOR_TOKENS='{}'`` would not revoke the file's)."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        file: PydanticBaseSettingsSource,
        environment: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        self._file = file
        self._environment = environment

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the whole mapping comes from __call__

    def __call__(self) -> dict[str, Any]:
        values = self._file()
        given = self._environment()
        fields = self.settings_cls.model_fields
        return {
            name: value
            for name, value in values.items()
            if not (
                name in given and name in fields and get_origin(fields[name].annotation) is dict
            )
        }
