"""The host's settings: one validated model, read from ``jobhost.toml`` and ``JOBHOST_*``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal, TypedDict

from jobhost_contracts import DstGap, DstRepeat, format_duration, parse_duration
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from jobhost.config.redaction import redact_text, redact_url

__all__ = [
    "GROUP_NAME",
    "LEASE_HEARTBEATS",
    "MAX_DURATION",
    "RUNTIME_SECRET_PREFIX",
    "ApiToken",
    "Duration",
    "JobOverride",
    "Settings",
    "split_listen_address",
]

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
"""A duration written ``90s``, ``15m``, ``24h`` or ``7d`` (a bare number is seconds)."""

_MIN_TOKEN = 16
RUNTIME_SECRET_PREFIX = "JOBHOST_RUNTIME_SECRET_"
"""The default of ``runtime_secret_env_prefix``."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_VARIABLES = ("JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS")
MAX_DURATION = timedelta(days=365)
"""The longest duration a host setting takes: longer ones overflow date arithmetic (year 9999)
long before they mean anything, and are always a typo."""

LEASE_HEARTBEATS = 2
"""A lease must span at least this many heartbeats, so one late heartbeat never loses a live
run's lease to another replica (which would then run the job beside it)."""


def _whole_number(value: object) -> object:
    # pydantic takes true for 1; a flag where a count belongs is a mistake worth naming.
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
"""A concurrency group's name: lower case letters, digits, ``.``, ``_`` and ``-``; 1 to 100."""

_Slots = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=100_000)]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
ApiScope = Literal["read", "write", "trigger"]
_LISTEN = re.compile(r"^(?P<host>[^\s:]*|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})$")


class JobOverride(BaseModel):
    """A deployment's change to one job, under ``[jobs."module.job-name"]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    cron: str | None = None
    interval: Duration | None = None
    timezone: str | None = None
    dst_gap: DstGap | None = None
    dst_repeat: DstRepeat | None = None
    concurrency_group: str | None = None


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


class StoreTimeouts(TypedDict):
    """The store engine's timeouts in seconds, as ``create_store_engine`` takes them."""

    connect_timeout: float
    statement_timeout: float


class Settings(BaseSettings):
    """Every host setting. Environment variables ``JOBHOST_<NAME>`` win over the file."""

    model_config = SettingsConfigDict(
        env_prefix="JOBHOST_", extra="forbid", frozen=True, validate_default=True
    )

    database_url: str = Field(
        "sqlite:///jobhost.db",
        description="SQLAlchemy URL of the store; the default is an SQLite file in the "
        "working directory. Several replicas need PostgreSQL (postgresql+psycopg://...).",
    )
    store_connect_timeout: Duration = Field(
        timedelta(seconds=10),
        description="PostgreSQL: longest wait to open a connection, for a free one in the "
        "pool, or for the server to acknowledge data; a store that does not answer within it "
        "is unavailable (HTTP 503). 0 turns it off.",
    )
    store_statement_timeout: Duration = Field(
        timedelta(seconds=60),
        description="PostgreSQL: longest one statement may run on the server before it is "
        "cancelled. 0 turns it off.",
    )
    poll_interval: Duration = Field(
        timedelta(minutes=5),
        description="Longest sleep between two looks at the store when nothing is due sooner; "
        "manual triggers, pause and resume wake the host at once.",
    )
    lease_duration: Duration = Field(
        timedelta(seconds=60),
        description="How long a claim on a job holds without renewal; a replica that dies "
        "mid-run loses its runs this long after its last heartbeat.",
    )
    heartbeat_interval: Duration = Field(
        timedelta(seconds=5),
        description="How often a host renews its leases and marks itself alive.",
    )
    worker_pool_size: Annotated[int, BeforeValidator(_whole_number)] = Field(
        8, ge=1, le=1024, description="Runs executed at once."
    )
    host_id: str | None = Field(
        None, description="This host's id in the store; default: hostname, pid and a suffix."
    )
    plugins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra plugins: import paths (package.module) or .py files. The "
        "environment form is comma-separated.",
    )
    http_listen: str | None = Field(
        None,
        description="HOST:PORT for /healthz, /readyz, /metrics and /report; off when unset.",
    )
    http_request_timeout: Duration = Field(
        timedelta(seconds=30),
        description="Longest an HTTP request may take before it is answered 504.",
    )
    http_concurrency: int = Field(
        4,
        ge=1,
        le=64,
        description="HTTP requests (dashboard, API, /report) at work at once; more wait up to "
        "2 seconds, then are answered 503. The probes and /metrics never wait.",
    )
    console_actions: bool = Field(
        False,
        description="Offer trigger, pause and resume on the dashboard to people signed in with "
        "an operator token; the dashboard is read-only otherwise.",
    )
    operator_tokens: dict[str, str] = Field(
        default_factory=dict,
        description="Who may act on the dashboard: operator name = secret token. The name is "
        "what the audit records.",
    )
    api_tokens: list[ApiToken] = Field(
        default_factory=list,
        description="Who may use the HTTP API under /api/v1: [[api_tokens]] entries with name, "
        "sha256 (of the secret) and scopes (read, write, trigger). The API is off without one. "
        "The environment form is JSON.",
    )
    web_read_access: Literal["open", "token"] = Field(
        "open",
        description="Who may read the dashboard, /report and the API: open (anyone who reaches "
        "the port; the API still needs its tokens) or token (the dashboard asks for a sign-in "
        "with an operator token or a read API token; /report needs a bearer token). /healthz "
        "and /readyz stay open.",
    )
    metrics_access: Literal["open", "token"] = Field(
        "open",
        description="Who may read /metrics: open (a scraper without a token) or token (a "
        "bearer API token with the read scope, or an operator token).",
    )
    runtime_secret_env_prefix: str = Field(
        RUNTIME_SECRET_PREFIX,
        description="Environment variables runtime jobs (created through the API) may read as "
        "secrets: those whose name starts with this prefix (and those in "
        "runtime_secrets_allowed). Variables with it are never read as settings, so this one "
        "is set in the file.",
    )
    runtime_secrets_allowed: list[str] = Field(
        default_factory=list,
        description="More environment variables runtime jobs may read as secrets, by exact "
        "name; never a setting's variable. The environment form is JSON.",
    )
    api_body_limit: int = Field(
        65_536,
        ge=1024,
        le=16_777_216,
        description="Largest request body the API reads, in bytes; a larger one is answered 413.",
    )
    backfill_limit: int = Field(
        10_000,
        ge=1,
        description="Most occurrences one backfill may select; a larger range is refused with "
        "its count.",
    )
    shutdown_grace: Duration = Field(
        timedelta(seconds=30),
        description="How long shutdown waits for running executors after cancelling them.",
    )
    audit_sink_timeout: Duration = Field(
        timedelta(seconds=5),
        description="How long one audit sink may take with one run before it is given up on.",
    )
    auto_migrate: bool = Field(
        True, description="Apply pending migrations when `jobhost run` starts."
    )
    overdue_grace: Duration = Field(
        timedelta(minutes=30),
        description="Default grace after a job's period before the dead-man check calls it "
        "overdue; a declaration's overdue_after wins.",
    )
    max_schedule_lag: Duration = Field(
        timedelta(seconds=60),
        description="How long the oldest due, unclaimed occurrence may wait before the "
        "schedule-lag health check fails: the hosts are falling behind.",
    )
    metrics_job_label: bool = Field(
        True,
        description="Label run metrics with the job's name; false drops the label, so the "
        "series stay a handful however large the catalog.",
    )
    metrics_refresh: Duration = Field(
        timedelta(seconds=15),
        description="How long the store-wide gauges (live hosts, jobs by status, overdue, "
        "clock skew) are kept before a collection reads the store again.",
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR.")
    log_format: Literal["text", "json"] = Field(
        "text",
        description="The host's lines on stderr: text, or json (one object a line: time, "
        "level, logger, message, and during a run job, run_id, attempt, trace_id, span_id).",
    )
    run_log_lines: Annotated[int, BeforeValidator(_whole_number)] = Field(
        1000,
        ge=2,
        le=1_000_000,
        description="Lines of a job's log kept with each run: the first half and the last "
        "half; the lines between are counted, not kept.",
    )
    run_log_bytes: Annotated[int, BeforeValidator(_whole_number)] = Field(
        262_144,
        ge=1024,
        le=1_073_741_824,
        description="Bytes of a job's log kept with each run, split like run_log_lines.",
    )
    clock_offset: Duration = Field(
        timedelta(0),
        description="Testing only: shifts this host's clock, to prove a wrong clock neither "
        "runs an occurrence early nor twice.",
    )
    jobs: dict[str, JobOverride] = Field(
        default_factory=dict, description='Per-job overrides: [jobs."files.orphan-cleanup"].'
    )
    concurrency_limits: dict[str, _Slots] = Field(
        default_factory=dict,
        description="Concurrency groups and their limits: group = N runs at once across every "
        "replica (whole numbers from 1). A job joins one by its declaration's "
        'concurrency_group or by concurrency_group under [jobs."NAME"]. The environment '
        "form is JSON.",
    )
    modules: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Module sections [modules.NAME], handed to executors."
    )

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
        return (_EnvWithoutSecrets(settings_cls, prefixes), init_settings)

    @field_validator("store_connect_timeout", "store_statement_timeout")
    @classmethod
    def _store_timeout(cls, value: timedelta) -> timedelta:
        if value < timedelta(0) or value > timedelta(hours=1):
            raise ValueError("must be between 0 (off) and 1h, e.g. '10s'")
        return value

    def warnings(self) -> list[str]:
        """Settings that are valid but do not do what they seem to (``validate`` and ``run``
        print them)."""
        found: list[str] = []
        if self.api_tokens and not self.http_listen:
            found.append(
                "api_tokens is set but http_listen is not: jobhost run serves no API for them; "
                "set http_listen (e.g. '0.0.0.0:8080'), or serve the API with jobhost serve"
            )
        return found

    def store_timeouts(self) -> StoreTimeouts:
        """The store engine's timeouts, in seconds, as :func:`create_store_engine` takes them."""
        return {
            "connect_timeout": self.store_connect_timeout.total_seconds(),
            "statement_timeout": self.store_statement_timeout.total_seconds(),
        }

    @field_validator("plugins", mode="before")
    @classmethod
    def _split_plugins(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator(
        "poll_interval",
        "lease_duration",
        "heartbeat_interval",
        "shutdown_grace",
        "audit_sink_timeout",
        "max_schedule_lag",
        "http_request_timeout",
        "metrics_refresh",
    )
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be positive: a duration greater than 0, e.g. '30s'")
        if value > MAX_DURATION:
            raise ValueError("must be at most 365d")
        return value

    @field_validator("overdue_grace")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("must not be negative, e.g. '30m' (0s: no grace)")
        if value > MAX_DURATION:
            raise ValueError("must be at most 365d")
        return value

    @field_validator("clock_offset")
    @classmethod
    def _small_offset(cls, value: timedelta) -> timedelta:
        if abs(value) > timedelta(days=1):
            raise ValueError("must be within one day either way, e.g. '20s' or '-20s'")
        return value

    @field_validator("host_id")
    @classmethod
    def _host_id(cls, value: str | None) -> str | None:
        if value == "":
            return None  # JOBHOST_HOST_ID= in an environment file means "not set"
        if value is not None and (not value.strip() or len(value) > 200):
            raise ValueError("must be 1 to 200 characters, or unset for a generated id")
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
            if name == "database_url" and isinstance(value, str):
                yield name, redact_url(value)
            elif name == "modules":
                yield name, _Redacted(repr(value))
            else:
                yield name, value

    @field_validator("http_listen")
    @classmethod
    def _listen_address(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        split_listen_address(value)
        return value

    @field_validator("operator_tokens")
    @classmethod
    def _tokens(cls, value: dict[str, str]) -> dict[str, str]:
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

    @field_validator("api_tokens")
    @classmethod
    def _unique_api_tokens(cls, value: list[ApiToken]) -> list[ApiToken]:
        seen: set[str] = set()
        for token in value:
            if token.name in seen:
                raise ValueError(f"two API tokens are named {token.name!r}; names are unique")
            if token.sha256 in {t.sha256 for t in value if t is not token}:
                raise ValueError(f"API token {token.name!r} has the same secret as another")
            seen.add(token.name)
        return value

    @field_validator("concurrency_limits")
    @classmethod
    def _group_names(cls, value: dict[str, int]) -> dict[str, int]:
        for name in value:
            if not GROUP_NAME.fullmatch(name):
                raise ValueError(
                    f"group name {name!r} must be 1 to 100 lower-case letters, digits, '.', "
                    "'_' or '-', starting with a letter or digit, e.g. warehouse = 2"
                )
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

    @field_validator("runtime_secrets_allowed")
    @classmethod
    def _allowed_secrets(cls, value: list[str]) -> list[str]:
        settings_names = {name.upper() for name in setting_variables()}
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name.upper() in settings_names or name.upper().startswith("JOBHOST_"):
                raise ValueError(
                    f"{name} is a jobhost variable; runtime jobs never read the host's "
                    "settings: give the secret a variable of its own"
                )
        return value

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
        return upper

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError(
                "is not a database URL; use e.g. 'sqlite:///jobhost.db' or "
                "'postgresql+psycopg://user@host/db'"
            ) from None
        if url.get_backend_name() not in {"sqlite", "postgresql"}:
            raise ValueError("must be an SQLite or PostgreSQL URL")
        return value

    def listen_address(self) -> tuple[str, int] | None:
        """``http_listen`` split into host and port, or None when HTTP is off."""
        if self.http_listen is None:
            return None
        return split_listen_address(self.http_listen)


def setting_variables() -> list[str]:
    """Every environment variable the host reads as a setting (the secret prefix's own aside:
    it lies under the default prefix and is read from the file only)."""
    names = [
        f"JOBHOST_{name.upper()}"
        for name in Settings.model_fields
        if name != "runtime_secret_env_prefix"
    ]
    return [*names, *_HOST_VARIABLES]


class _EnvWithoutSecrets(EnvSettingsSource):
    """The ``JOBHOST_*`` environment, without the variables meant for runtime jobs."""

    def __init__(self, settings_cls: type[BaseSettings], prefixes: set[str]) -> None:
        self._prefixes = tuple(prefix.lower() for prefix in prefixes)
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        found = super()._load_env_vars()
        return {k: v for k, v in found.items() if not k.lower().startswith(self._prefixes)}


def split_listen_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host is every address) as a pair;
    :class:`ValueError` saying the expected form otherwise."""
    match = _LISTEN.match(value)
    if not match or not 0 < int(match["port"]) < 65536:
        raise ValueError("must be HOST:PORT, e.g. '0.0.0.0:8080' or '127.0.0.1:9100'")
    return match["host"].strip("[]") or "0.0.0.0", int(match["port"])


class _Redacted:
    """Text shown as it is in a repr, after redaction."""

    def __init__(self, text: str) -> None:
        self._text = redact_text(text)

    def __repr__(self) -> str:
        return self._text
