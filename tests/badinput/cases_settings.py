"""Bad settings: in the file and in the environment. Each is refused by `validate` (or the
command named) with exit 3, naming the setting, where the value came from, and what is allowed."""

from __future__ import annotations

from tests.badinput.corpus_support import Case

V = ("validate",)
IN_FILE = "(in jobhost.toml)"


def _file(case_id: str, key: str, value: str, *says: str, args: tuple[str, ...] = V) -> Case:
    return Case(f"file-{case_id}", args, 3, (f"{key} {IN_FILE}", *says), settings={key: value})


def _env(case_id: str, variable: str, value: str, *says: str, args: tuple[str, ...] = V) -> Case:
    return Case(
        f"env-{case_id}", args, 3, (f"environment {variable}", *says), env={variable: value}
    )


def _override(case_id: str, body: str, *says: str) -> Case:
    return Case(f"override-{case_id}", V, 3, says, tables=f'[jobs."unruly.succeed"]\n{body}\n')


FILE_CASES = [
    Case("file-toml-syntax", V, 3, ("is not valid TOML",), raw_config='database_url = "x\n'),
    Case("file-not-utf8", V, 3, ("jobhost.toml", "can't decode byte 0xff"), raw_config="\udcff"),
    Case(
        "file-unknown-key",
        V,
        3,
        (
            "lease_duraton (in jobhost.toml): is not a known setting (did you mean "
            "'lease_duration'?)",
            "settings.md",
        ),
        settings={"lease_duraton": '"1m"'},
    ),
    Case(
        "file-module-table-typo",
        V,
        3,
        ("module (in jobhost.toml): is not a known setting (did you mean 'modules'?)",),
        tables="[module.shop]\nreminder_after = 5\n",
    ),
    _file("pool-zero", "worker_pool_size", "0", "greater than or equal to 1"),
    _file("dashboard-ftp", "dashboard_url", '"ftp://ops.example.com"', "http(s) URL"),
    _file("dashboard-query", "dashboard_url", '"https://ops.example.com/?a=1"', "without a query"),
    _file("pool-huge", "worker_pool_size", "5000", "less than or equal to 1024"),
    _file("pool-bool", "worker_pool_size", "true", "must be a whole number, not true or false"),
    _file("pool-text", "worker_pool_size", '"many"', "valid integer"),
    _file("pool-fraction", "worker_pool_size", "2.5", "valid integer"),
    _file("poll-word", "poll_interval", '"soon"', "is not a duration", "'90s'"),
    _file("poll-zero", "poll_interval", '"0s"', "must be positive"),
    _file("lease-negative", "lease_duration", '"-1s"', "must be positive"),
    _file("lease-zero", "lease_duration", "0", "must be positive"),
    Case(
        "file-lease-under-two-heartbeats",
        V,
        3,
        ("at least 2x heartbeat_interval (5s)", "raise lease_duration to 10s or more"),
        settings={"lease_duration": '"5s"'},
    ),
    Case(
        "file-heartbeat-over-half-the-lease",
        V,
        3,
        ("raise lease_duration to 2m or more, or lower heartbeat_interval",),
        settings={"heartbeat_interval": '"1m"'},
    ),
    _file("grace-overflow", "shutdown_grace", '"99999999999w"', "too long a duration"),
    _file("grace-negative", "shutdown_grace", '"-30s"', "must be positive"),
    _file("sink-timeout-too-long", "audit_sink_timeout", '"400d"', "must be at most 365d"),
    _file("overdue-negative", "overdue_grace", '"-5m"', "must not be negative"),
    _file("clock-offset-days", "clock_offset", '"3d"', "within one day"),
    _file("listen-no-port", "http_listen", '"localhost"', "must be HOST:PORT"),
    _file("listen-port-range", "http_listen", '"0.0.0.0:70000"', "must be HOST:PORT"),
    _file("log-level", "log_level", '"LOUD"', "must be one of DEBUG, INFO, WARNING, ERROR"),
    _file(
        "database-mysql", "database_url", '"mysql://ops:S3cretPW@db/app"', "SQLite or PostgreSQL"
    ),
    _file("database-garbage", "database_url", '"not a url"', "is not a database URL"),
    _file("database-empty", "database_url", '""', "is not a database URL"),
    _file("host-id-blank", "host_id", '"   "', "must be 1 to 200 characters"),
    _file("host-id-long", "host_id", '"' + "h" * 300 + '"', "must be 1 to 200 characters"),
    _file("auto-migrate-word", "auto_migrate", '"maybe"', "valid boolean"),
    _file("plugins-number", "plugins", "5", "valid list"),
    Case(
        "file-modules-number",
        V,
        3,
        ("modules (in jobhost.toml) = 5", "valid dictionary"),
        raw_config='database_url = "sqlite:///{dir}/store.db"\nmodules = 5\n',
    ),
    _file("bad-setting-stops-run", "worker_pool_size", "0", "greater than", args=("run",)),
    _file(
        "bad-setting-stops-trigger",
        "lease_duration",
        '"-1s"',
        "must be positive",
        args=("trigger", "unruly.succeed"),
    ),
    _override(
        "unknown-key",
        'intervl = "5m"',
        'jobs."unruly.succeed".intervl (in jobhost.toml): is not a known setting',
    ),
    Case(
        "override-unknown-job",
        V,
        3,
        ("[unknown-override]", "nosuch.job"),
        tables='[jobs."nosuch.job"]\nenabled = false\n',
    ),
    _override("cron-syntax", 'cron = "61 * * * *"', "[cron-syntax]", "minute"),
    _override("cron-never-fires", 'cron = "0 0 30 2 *"', "[cron-never-fires]"),
    _override("timezone", 'timezone = "Mars/Base"', "[unknown-timezone]", "Mars/Base"),
    _override("both-triggers", 'cron = "0 * * * *"\ninterval = "5m"', "[override-both-triggers]"),
    _override("negative-interval", 'interval = "-5m"', "[non-positive-interval]"),
    _override(
        "huge-interval",
        'interval = "100000000d"',
        "[interval-too-long]",
        "unruly.succeed",
        '[jobs."unruly.succeed"]',
    ),
    _override("enabled-word", 'enabled = "perhaps"', "valid boolean"),
    Case(
        "retention-keep-days-zero",
        V,
        3,
        ("keep_days = 0", "must be a whole number from 1 to 36500"),
        env={"JOBHOST_LOAD_PLUGINS": "jobhost"},
        tables="[modules.jobhost]\nkeep_days = 0\n",
    ),
    Case(
        "retention-unknown-key",
        V,
        3,
        ("keep_dayz", "not a setting of the run retention job"),
        env={"JOBHOST_LOAD_PLUGINS": "jobhost"},
        tables="[modules.jobhost]\nkeep_dayz = 3\n",
    ),
    Case(
        "retention-overflowing-days",
        V,
        3,
        ("keep_hosts_days = 99999999", "from 1 to 36500"),
        env={"JOBHOST_LOAD_PLUGINS": "jobhost"},
        tables="[modules.jobhost]\nkeep_hosts_days = 99999999\n",
    ),
    Case("config-missing", ("--config", "{dir}/nope.toml", "validate"), 3, ("does not exist",)),
    Case("config-is-a-directory", ("--config", "{dir}", "validate"), 2, ("is a directory",)),
]

ENV_CASES = [
    Case(
        "env-unknown-variable",
        V,
        0,
        (
            "warning: environment variable JOBHOST_POLL_INTERVALL is not a jobhost setting and "
            "is ignored; did you mean JOBHOST_POLL_INTERVAL?",
        ),
        env={"JOBHOST_POLL_INTERVALL": "5s"},
    ),
    _env("jobs-malformed-json", "JOBHOST_JOBS", "{bad", "is not valid JSON", "write one JSON"),
    _env("modules-malformed-json", "JOBHOST_MODULES", "{'a': 1}", "is not valid JSON"),
    _env("jobs-not-an-object", "JOBHOST_JOBS", "[1, 2]", "must be a JSON object"),
    _env(
        "jobs-unknown-key",
        "JOBHOST_JOBS",
        '{"unruly.succeed": {"intervl": "5m"}}',
        "is not a known setting",
    ),
    _env("jobs-malformed-stops-run", "JOBHOST_JOBS", "{", "is not valid JSON", args=("run",)),
    _env("pool-bool", "JOBHOST_WORKER_POOL_SIZE", "true", "valid integer"),
    _env("pool-negative", "JOBHOST_WORKER_POOL_SIZE", "-1", "greater than or equal to 1"),
    _env("lease-negative", "JOBHOST_LEASE_DURATION", "-1s", "must be positive"),
    _env("poll-overflow", "JOBHOST_POLL_INTERVAL", "99999999999w", "too long a duration"),
    _env("heartbeat-slow", "JOBHOST_HEARTBEAT_INTERVAL", "45s", "raise lease_duration to 1m30s"),
    _env("database-mysql", "JOBHOST_DATABASE_URL", "mysql://ops:S3cretPW@db/x", "SQLite or"),
    _env("log-level", "JOBHOST_LOG_LEVEL", "LOUD", "must be one of"),
    _env("listen", "JOBHOST_HTTP_LISTEN", "nonsense", "must be HOST:PORT"),
    _env("auto-migrate", "JOBHOST_AUTO_MIGRATE", "maybe", "valid boolean"),
    _env("clock-offset", "JOBHOST_CLOCK_OFFSET", "2d", "within one day"),
    _env("overdue-negative", "JOBHOST_OVERDUE_GRACE", "-1m", "must not be negative"),
    Case(
        "env-config-missing",
        V,
        3,
        ("does not exist", "JOBHOST_CONFIG"),
        store=False,
        env={"JOBHOST_CONFIG": "{dir}/missing.toml"},
    ),
    Case(
        "env-database-unreachable",
        ("report",),
        1,
        ("cannot reach the store at postgresql+psycopg://ops:***@127.0.0.1:1/app",),
        store=False,
        env={"JOBHOST_DATABASE_URL": "postgresql+psycopg://ops:S3cretPW@127.0.0.1:1/app"},
    ),
    Case(
        "env-plugin-file-missing",
        V,
        3,
        ("does not exist; fix the path in plugins / JOBHOST_PLUGINS",),
        store=False,
        env={"JOBHOST_PLUGINS": "{dir}/nowhere/plugin.py"},
    ),
    Case(
        "env-load-plugins-unknown",
        V,
        3,
        ("no installed distribution offers", "fix the name"),
        store=False,
        env={"JOBHOST_LOAD_PLUGINS": "nosuch"},
    ),
]
