"""The host's settings: one validated model, read from ``jobhost.toml`` and ``JOBHOST_*``; each
field's type carries its check (:mod:`jobhost.config.values`), the model the rules across fields."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal, TypedDict, get_origin

from jobhost_contracts import format_duration
from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from jobhost.config.redaction import compile_redact_pattern, redact_text, redact_url
from jobhost.config.values import (
    ApiTokens,
    ClockOffset,
    DashboardUrl,
    DatabaseUrl,
    Grace,
    GroupLimits,
    HostId,
    JobOverride,
    ListenAddress,
    LogLevel,
    OperatorTokens,
    PositiveDuration,
    PostgresUrl,
    ProxyAddress,
    SessionSecret,
    StoreTimeout,
    WholeNumber,
    is_loopback,
    split_listen_address,
)

__all__ = ["LEASE_HEARTBEATS", "RUNTIME_SECRET_PREFIX", "Settings", "split_listen_address"]

LEASE_HEARTBEATS = 2
"""A lease must span at least this many heartbeats, so one late heartbeat never loses a live
run's lease to another replica (which would then run the job beside it)."""
RUNTIME_SECRET_PREFIX = "JOBHOST_RUNTIME_SECRET_"
HOST_VARIABLES = ("JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS")  # read, but no settings
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    http_concurrency: int = Field(4, ge=1, le=64)
    console_actions: bool = False
    operator_tokens: OperatorTokens = Field(default_factory=dict)
    api_tokens: ApiTokens = Field(default_factory=list)
    web_read_access: Literal["open", "token"] | None = None
    session_secret: SessionSecret = None
    metrics_access: Literal["open", "token"] = "open"
    runtime_secret_env_prefix: str = RUNTIME_SECRET_PREFIX
    runtime_secrets_allowed: list[str] = Field(default_factory=list)
    api_body_limit: int = Field(65_536, ge=1024, le=16_777_216)
    backfill_limit: int = Field(10_000, ge=1)
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

    def module_source(self, section: str, environ: Mapping[str, str]) -> str:
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
