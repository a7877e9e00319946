"""The host's settings: one validated model, read from ``jobhost.toml`` and ``JOBHOST_*``.

Each field's type carries its check (:mod:`jobhost.config.values`); this model adds the rules
that need the model itself: the environment as a source, the runtime secret variables it must
not hand out, and the lease that must outlast its heartbeats.
"""

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

__all__ = [
    "LEASE_HEARTBEATS",
    "RUNTIME_SECRET_PREFIX",
    "Settings",
    "StoreOptions",
    "setting_variables",
    "split_listen_address",
    "unknown_variables",
]

LEASE_HEARTBEATS = 2
"""A lease must span at least this many heartbeats, so one late heartbeat never loses a live
run's lease to another replica (which would then run the job beside it)."""
RUNTIME_SECRET_PREFIX = "JOBHOST_RUNTIME_SECRET_"
"""The default of ``runtime_secret_env_prefix``."""
HOST_VARIABLES = ("JOBHOST_CONFIG", "JOBHOST_LOAD_PLUGINS")
"""Variables the host reads that are not settings of the model."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Settings(BaseSettings):
    """Every host setting. Environment variables ``JOBHOST_<NAME>`` win over the file."""

    model_config = SettingsConfigDict(
        env_prefix="JOBHOST_", extra="forbid", frozen=True, validate_default=True
    )

    database_url: DatabaseUrl = Field(
        "sqlite:///jobhost.db",
        description="SQLAlchemy URL of the store; the default is an SQLite file in the "
        "working directory. Several replicas need PostgreSQL (postgresql+psycopg://...).",
    )
    store_connect_timeout: StoreTimeout = Field(
        timedelta(seconds=10),
        description="PostgreSQL: longest wait to open a connection, for a free one in the "
        "pool, or for the server to acknowledge data; a store that does not answer within it "
        "is unavailable (HTTP 503). 0 turns it off.",
    )
    store_statement_timeout: StoreTimeout = Field(
        timedelta(seconds=60),
        description="PostgreSQL: longest one statement may run on the server before it is "
        "cancelled; the process waits for any answer of the server this plus 5s at most, then "
        "drops the connection. 0 turns both off.",
    )
    store_pooling: Literal["none", "transaction"] = Field(
        "none",
        description="PostgreSQL: 'transaction' when the store's connections go through a "
        "transaction-mode pooler (PgBouncer): no prepared statements, no session settings, "
        "wake-ups through store_listen_url or by polling. 'none' for a direct connection or a "
        "session-mode pooler.",
    )
    store_listen_url: PostgresUrl = Field(
        None,
        description="PostgreSQL with store_pooling = 'transaction': a direct URL (not through "
        "the pooler) to LISTEN for wake-ups on; unset, hosts poll the store once a second.",
    )
    poll_interval: PositiveDuration = Field(
        timedelta(minutes=5),
        description="Longest sleep between two looks at the store when nothing is due sooner; "
        "manual triggers, pause and resume wake the host at once.",
    )
    lease_duration: PositiveDuration = Field(
        timedelta(seconds=60),
        description="How long a claim on a job holds without renewal; a replica that dies "
        "mid-run loses its runs this long after its last heartbeat.",
    )
    heartbeat_interval: PositiveDuration = Field(
        timedelta(seconds=5),
        description="How often a host renews its leases and marks itself alive.",
    )
    worker_pool_size: WholeNumber = Field(8, ge=1, le=1024, description="Runs executed at once.")
    host_id: HostId = Field(
        None, description="This host's id in the store; default: hostname, pid and a suffix."
    )
    plugins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Extra plugins: import paths (package.module) or .py files. The "
        "environment form is comma-separated.",
    )
    http_listen: ListenAddress = Field(
        None,
        description="HOST:PORT for /healthz, /readyz, /metrics and /report; off when unset.",
    )
    trusted_proxies: Annotated[list[ProxyAddress], NoDecode] = Field(
        default_factory=list,
        description="Addresses (IP or CIDR) of the reverse proxies in front of http_listen: "
        "only a connection from one of them has its X-Forwarded-For and X-Forwarded-Proto "
        "believed (for the wrong-token brake, the audit and the log). Empty: none is, the "
        "peer's address counts. The environment form is comma-separated.",
    )
    http_request_timeout: PositiveDuration = Field(
        timedelta(seconds=30),
        description="Longest an HTTP request may take before it is answered 504.",
    )
    http_header_timeout: PositiveDuration = Field(
        timedelta(seconds=5),
        description="Longest a client may take to send a request's head (its line and "
        "headers), from opening the connection; a later one is answered 408 and the "
        "connection closed.",
    )
    http_body_timeout: PositiveDuration = Field(
        timedelta(seconds=10),
        description="Longest a client may take to send a request's body; it is read whole "
        "before the request waits for one of the http_concurrency places, and a later one is "
        "answered 408 and the connection closed.",
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
    operator_tokens: OperatorTokens = Field(
        default_factory=dict,
        description="Who may act on the dashboard: operator name = secret token. The name is "
        "what the audit records.",
    )
    api_tokens: ApiTokens = Field(
        default_factory=list,
        description="Who may use the HTTP API under /api/v1: [[api_tokens]] entries with name, "
        "sha256 (of the secret) and scopes (read, write, trigger). The API is off without one. "
        "The environment form is JSON.",
    )
    web_read_access: Literal["open", "token"] | None = Field(
        None,
        description="Who may read the dashboard, /report and the API: open (anyone who reaches "
        "the port; the API still needs its tokens) or token (the dashboard asks for a sign-in "
        "with an operator token or a read API token; /report needs a bearer token). /healthz "
        "and /readyz stay open. Unset: open on a loopback listener (127.0.0.1, ::1, "
        "localhost), token on any other.",
    )
    session_secret: SessionSecret = Field(
        None,
        description="The key dashboard sessions are signed with: at least 32 characters, the "
        "same on every replica; changing it signs everyone out. Unset: derived from the "
        "operator tokens, or random for the process when there are none.",
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
    shutdown_grace: PositiveDuration = Field(
        timedelta(seconds=30),
        description="How long shutdown waits for running executors after cancelling them.",
    )
    audit_sink_timeout: PositiveDuration = Field(
        timedelta(seconds=5),
        description="How long one audit sink may take with one run before it is given up on.",
    )
    auto_migrate: bool = Field(
        True, description="Apply pending migrations when `jobhost run` starts."
    )
    overdue_grace: Grace = Field(
        timedelta(minutes=30),
        description="Default grace after a job's period before the dead-man check calls it "
        "overdue; a declaration's overdue_after wins.",
    )
    max_schedule_lag: PositiveDuration = Field(
        timedelta(seconds=60),
        description="How long the oldest due, unclaimed occurrence may wait before the "
        "schedule-lag health check fails: the hosts are falling behind.",
    )
    metrics_job_label: bool = Field(
        True,
        description="Label run metrics with the job's name; false drops the label, so the "
        "series stay a handful however large the catalog.",
    )
    dashboard_url: DashboardUrl = Field(
        None,
        description="The dashboard's address as operators open it (https://host/prefix): the "
        "per-job gauges carry it, so an alert links to /jobs/NAME and /failures?job=NAME.",
    )
    metrics_refresh: PositiveDuration = Field(
        timedelta(seconds=15),
        description="How long the store-wide gauges (live hosts, jobs by status, overdue, "
        "clock skew) are kept before a collection reads the store again.",
    )
    log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR.")
    log_format: Literal["text", "json"] = Field(
        "text",
        description="The host's lines on stderr: text, or json (one object a line: time, "
        "level, logger, message, and during a run job, run_id, attempt, trace_id, span_id).",
    )
    run_log_lines: WholeNumber = Field(
        1000,
        ge=2,
        le=1_000_000,
        description="Lines of a job's log kept with each run: the first half and the last "
        "half; the lines between are counted, not kept.",
    )
    run_log_bytes: WholeNumber = Field(
        262_144,
        ge=1024,
        le=1_073_741_824,
        description="Bytes of a job's log kept with each run, split like run_log_lines.",
    )
    redact_patterns: list[str] = Field(
        default_factory=list,
        description="More regular expressions (Python syntax) whose matches are redacted "
        "(***) from run logs, error texts and the host's log, beside the credentials jobhost "
        "knows; a group named secret limits it to that group. The environment form is JSON.",
    )
    clock_offset: ClockOffset = Field(
        timedelta(0),
        description="Testing only: shifts this host's clock, to prove a wrong clock neither "
        "runs an occurrence early nor twice.",
    )
    jobs: dict[str, JobOverride] = Field(
        default_factory=dict, description='Per-job overrides: [jobs."files.orphan-cleanup"].'
    )
    concurrency_limits: GroupLimits = Field(
        default_factory=dict,
        description="Concurrency groups and their limits: group = N runs at once across every "
        "replica (whole numbers from 1). A job joins one by its declaration's "
        'concurrency_group or by concurrency_group under [jobs."NAME"]. The environment '
        "form is JSON.",
    )
    modules: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Module sections [modules.NAME], handed to executors."
    )
    _file: str | None = PrivateAttr(None)
    """The configuration file these settings were read from, set by ``load_settings``."""

    def module_source(self, section: str, environ: Mapping[str, str]) -> str:
        """Where ``[modules.SECTION]`` was written, for a message about it: the variable
        ``JOBHOST_MODULES`` (which wins over the file) or the configuration file."""
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
        """Settings that are valid but do not do what they seem to (``validate`` and ``run``
        print them)."""
        found = unknown_variables(os.environ, self.runtime_secret_env_prefix)
        if self.api_tokens and not self.http_listen:
            found.append(
                "api_tokens is set but http_listen is not: jobhost run serves no API for them; "
                "set http_listen (e.g. '0.0.0.0:8080'), or serve the API with jobhost serve"
            )
        return found

    def store_options(self, shortest_lease: timedelta | None = None) -> StoreOptions:
        """The store store's timeouts (in seconds) and pooling, as :func:`create_store_engine`
        takes them; ``shortest_lease`` is the shortest a job of the process declares, if any."""
        # A transaction idle for a whole lease belongs to a frozen process, whose claims are
        # already lost: ended, its row locks no longer hide its runs from the others. The
        # shortest lease counts: a job leased for 10 s must not wait a minute for its runs.
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
        if self.http_listen is None:
            return None
        return split_listen_address(self.http_listen)

    def read_access_for(self, host: str) -> Literal["open", "token"]:
        """``web_read_access``, or when unset what a listener on ``host`` gets: open on a
        loopback address, token on any other (a wildcard address included)."""
        if self.web_read_access is not None:
            return self.web_read_access
        return "open" if is_loopback(host) else "token"

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
    """The store store's timeouts in seconds and its pooling, as ``create_store_engine`` takes
    them."""

    connect_timeout: float
    statement_timeout: float
    idle_transaction_timeout: float
    pooling: Literal["none", "transaction"]
    listen_url: str | None


_TOOLING_PREFIXES = ("JOBHOST_TEST_", "JOBHOST_BENCH_")
"""Variables of jobhost's own test suite and benchmarks, which no host reads."""


def unknown_variables(environ: Mapping[str, str], secret_prefix: str) -> list[str]:
    """A warning for every ``JOBHOST_*`` variable no setting reads, naming the closest one.

    A warning rather than a refusal: an environment carries variables of other tools and older
    versions, and a host must not stop for one; but a misspelt one must not go unnoticed.
    """
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
    """Every environment variable the host reads as a setting (the secret prefix's own aside:
    it lies under the default prefix and is read from the file only)."""
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
    """The file's settings (``file``), without the tables ``environment`` gives.

    A setting given in the environment replaces the file's whole, a table as much as a list or a
    number: ``JOBHOST_OPERATOR_TOKENS='{}'`` leaves no operator, whatever the file names (merged
    key by key, the file's names would survive the variable meant to revoke them).
    """

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
