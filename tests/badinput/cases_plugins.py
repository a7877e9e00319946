"""Plugins that fail in every way, and executors that misbehave.

A broken plugin is reported under its name with the fix (`validate`, exit 3; `run` refuses to
start). A misbehaving executor is a failed run with its cause in the ledger (`trigger`, exit 1),
with every earlier row kept and no secret printed.
"""

from __future__ import annotations

from tests.badinput.corpus_support import SECRET, Case

_HEAD = """\
import sys
from datetime import timedelta

from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, RetryPolicy, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


def job(name="broken.job", **fields):
    fields.setdefault("interval", timedelta(hours=1))
    declaration = BackgroundJobDeclaration(name=name, module="broken", **fields)
    return JobRegistration(declaration, Executor())

"""


def _hook(body: str) -> str:
    return _HEAD + "@hookimpl\ndef jobhost_jobs(settings):\n" + body + "\n"


def _plugin(
    case_id: str,
    source: str,
    *says: str,
    args: tuple[str, ...] = ("validate",),
    named: bool = True,
) -> Case:
    """A broken plugin: the message names it (its file) unless the problem is one job's."""
    return Case(
        f"plugin-{case_id}", args, 3, (*(["plugin.py"] if named else []), *says), plugin=source
    )


def _job(case_id: str, fields: str, code: str, *says: str) -> Case:
    return Case(
        f"declaration-{case_id}",
        ("validate",),
        3,
        (f"broken.job (module broken) [{code}]", *says),
        plugin=_hook(f"    return [job({fields})]"),
    )


_SHOP = """\
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict
from returns.result import Success

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobRegistration,
    hookimpl,
    module_settings,
    positive_duration,
)


class ShopSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reminder_after: Annotated[timedelta, BeforeValidator(positive_duration)] = timedelta(hours=1)


def remind(context):
    return Success(None)


@hookimpl
def jobhost_jobs(settings):
    shop = module_settings(ShopSettings, settings, "shop")
    declaration = BackgroundJobDeclaration(
        name="shop.remind",
        module="shop",
        interval=timedelta(hours=1),
        enabled=shop is not None,
        concurrency_group="shop-db",
    )
    return [JobRegistration(declaration, remind)]
"""
_NOT_THE_PLUGIN = (SECRET, "fix the plugin", "unused-concurrency-limit", "plugin-hook")


def _shop(case_id: str, section: str, *says: str) -> Case:
    """A module reading [modules.shop] through module_settings: a configuration problem."""
    return Case(
        f"settings-{case_id}",
        ("validate",),
        3,
        ("configuration [module-settings]: [modules.shop] (in jobhost.toml)", *says),
        tables=f"[concurrency_limits]\nshop-db = 1\n[modules.shop]\n{section}\n",
        plugin=_SHOP,
        never=_NOT_THE_PLUGIN,
    )


SETTINGS_CASES = [
    Case(
        "settings-module-not-configured",
        ("validate",),
        0,
        (
            "warning: shop.remind (module shop) [unknown-concurrency-group]",
            "the job is disabled: the host starts",
            "shop.remind: disabled ([modules.shop] is not configured), every 1h, group shop-db",
        ),
        plugin=_SHOP,
    ),
    _shop(
        "unknown-key",
        "reminder_afer = 5",
        "reminder_afer = 5: is not a known setting (did you mean 'reminder_after'?)",
    ),
    _shop(
        "bad-duration",
        'reminder_after = "soon"',
        "reminder_after = 'soon'",
        "is not a duration",
    ),
    _shop(
        "negative-duration",
        'reminder_after = "-5m"',
        "reminder_after = '-5m': must be a positive duration",
    ),
]

PLUGIN_CASES = [
    *SETTINGS_CASES,
    _plugin(
        "hook-without-hookimpl",
        _hook("    return [job()]").replace("@hookimpl\n", ""),
        "[plugin-no-hooks]: implements no jobhost hook: its jobhost_jobs is not marked; is "
        "@hookimpl missing?",
    ),
    _plugin("syntax-error", "def broken(:\n", "failed to import: SyntaxError", "fix the plugin"),
    _plugin("missing-import", "import no_such_module_anywhere\n", "ModuleNotFoundError"),
    _plugin("raises-at-import", "raise RuntimeError('boom at import')\n", "RuntimeError: boom"),
    _plugin("exit-9-at-import", "import sys\nsys.exit(9)\n", "called sys.exit(9) while being"),
    _plugin("exit-0-at-import", "import sys\nsys.exit(0)\n", "called sys.exit(0)"),
    _plugin(
        "exit-9-stops-run",
        "import sys\nsys.exit(9)\n",
        "called sys.exit(9)",
        "the host will not start",
        args=("run",),
    ),
    _plugin("interrupt-at-import", "raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    _plugin("recursion", "def f():\n    return f()\nf()\n", "RecursionError"),
    _plugin(
        "secret-in-import-error",
        "raise ConnectionError('cannot reach postgresql://app:S3cretPW@db/app')\n",
        "postgresql://app:***@db/app",
    ),
    _plugin("huge-import-error", "raise ValueError('x' * 2_000_000)\n", "[cut: 2000000"),
    _plugin("hook-raises", _hook("    raise ValueError('no config')"), "jobhost_jobs raised"),
    _plugin("hook-exits", _hook("    sys.exit(4)"), "jobhost_jobs called sys.exit(4)"),
    _plugin("hook-returns-none", _hook("    return None"), "[plugin-bad-result]", "return a list"),
    _plugin("hook-returns-text", _hook("    return 'jobs'"), "[plugin-bad-result]"),
    _plugin("hook-returns-dict", _hook("    return {'a': 1}"), "[plugin-bad-result]"),
    _plugin(
        "hook-is-async",
        _HEAD + "@hookimpl\nasync def jobhost_jobs(settings):\n    return []\n",
        "returned a coroutine",
    ),
    _plugin(
        "hook-generator-raises",
        _hook("    yield job()\n    raise RuntimeError('half way')"),
        "jobhost_jobs raised RuntimeError: half way",
    ),
    _plugin("hook-pair-too-short", _hook("    return [(job().declaration,)]"), "broken"),
    _plugin("hook-declaration-only", _hook("    return [job().declaration]"), "broken"),
    _plugin(
        "hook-executor-class",
        _hook("    return [(job().declaration, Executor)]"),
        "[bad-executor]",
        named=False,
    ),
    _plugin(
        "hook-executor-without-context",
        _hook(
            "    class Lazy:\n"
            "        def execute(self):\n"
            "            return Success(None)\n"
            "    return [(job().declaration, Lazy())]"
        ),
        "broken.job (module broken) [bad-executor]: executor Lazy.execute(self) cannot be called",
        "write def execute(self, context: JobContext) -> Result",
        named=False,
    ),
    _plugin(
        "hook-function-without-context",
        _hook("    return [(job().declaration, lambda: Success(None))]"),
        "broken.job (module broken) [bad-executor]: executor function "
        "jobhost_jobs.<locals>.<lambda>() cannot be called",
        named=False,
    ),
    _plugin(
        "hook-executor-without-execute",
        _hook("    return [(job().declaration, object())]"),
        "[bad-executor]",
        named=False,
    ),
    _plugin(
        "declaration-wrong-type",
        _hook("    return [job(enabled='yes')]"),
        "BackgroundJobDeclaration.enabled must be bool",
    ),
    _plugin(
        "hook-unknown-argument",
        _HEAD + "@hookimpl\ndef jobhost_jobs(settings, colour):\n    return []\n",
        "[plugin-hook]",
        "take only the arguments the hook documents",
    ),
    _plugin(
        "unknown-hook",
        _HEAD + "@hookimpl\ndef jobhost_jobz(settings):\n    return []\n",
        "[plugin-unknown-hook]",
        "not a jobhost hook",
    ),
    _plugin(
        "hook-wrapper",
        _HEAD + "@hookimpl(wrapper=True)\ndef jobhost_jobs(settings):\n    return (yield)\n",
        "is a hook wrapper",
    ),
    _plugin(
        "duplicate-job-name",
        _hook("    return [job('unruly.succeed')]"),
        "[duplicate-name]",
        "rename one of them",
        named=False,
    ),
    Case(
        "declaration-bad-name",
        ("validate",),
        3,
        ("[bad-name]", "Broken Job"),
        plugin=_hook("    return [job('Broken Job')]"),
    ),
    _job("cron-syntax", "interval=None, cron='61 * * * *'", "cron-syntax"),
    _job("cron-never-fires", "interval=None, cron='0 0 30 2 *'", "cron-never-fires"),
    _job("timezone", "timezone='Mars/Base'", "unknown-timezone"),
    _job("both-triggers", "cron='0 * * * *'", "both-triggers"),
    _job("no-trigger", "interval=None", "no-trigger"),
    _job("negative-interval", "interval=timedelta(minutes=-5)", "non-positive-interval"),
    _job("negative-timeout", "timeout=timedelta(seconds=-1)", "bad-timeout", "must be positive"),
    _job("short-lease", "lease=timedelta(seconds=1)", "bad-lease", "at least 10s"),
    _job("zero-attempts", "retry=RetryPolicy(max_attempts=0)", "bad-retry", "max_attempts = 0"),
    _job("wild-jitter", "retry=RetryPolicy(jitter=5.0)", "bad-retry", "must be 0 to 1"),
    _job("retry-on-typo", "retry=RetryPolicy(retry_on=frozenset({'faild'}))", "bad-retry", "faild"),
    _job("zero-concurrency", "max_concurrent=0", "bad-overlap", "must be 1 to 1024"),
    _job("zero-catch-up", "catch_up_limit=0", "bad-misfire", "must be 1 to 10000"),
    _job("critical-disabled", "critical=True, enabled=False", "critical-disabled"),
    Case(
        "plugin-path-is-a-directory",
        ("validate",),
        3,
        ("does not exist",),
        settings={"plugins": '["{dir}"]'},
    ),
    Case(
        "plugin-module-not-importable",
        ("validate",),
        3,
        ("no_such_package.jobs", "ModuleNotFoundError", "fix the plugin"),
        settings={"plugins": '["no_such_package.jobs"]'},
    ),
]


def _executor(behaviour: str, *says: str) -> Case:
    # An executor's exception is logged with its traceback, as the design asks ("never
    # swallowed from the logs"); any other traceback fails the case.
    return Case(
        f"executor-{behaviour}",
        ("trigger", f"unruly.{behaviour}"),
        1,
        says,
        writes=True,
        new_runs=("failed",),
        job_traceback=True,
    )


EXECUTOR_CASES = [
    _executor("raise-secret", "RuntimeError", "postgresql://app:***@db/app"),
    _executor("fail-secret", "postgresql://app:***@db/app"),
    _executor("async-raise", "postgresql://app:***@db/app"),
    _executor("exit-3", "SystemExit(3): the executor tried to end the process"),
    _executor("exit-none", "SystemExit()"),
    _executor("exit-text", "SystemExit('giving up')"),
    _executor("interrupt", "KeyboardInterrupt()"),
    _executor("base-exception", "raised a BaseException that is not an Exception"),
    _executor("huge-failure", "[cut: 5000000 characters in all]"),
    _executor("huge-raise", "[cut: 5000000 characters in all]"),
    _executor("nul-failure", "before\\x00after"),
    _executor("surrogate-failure", "bad \\udcff byte"),
    _executor("not-a-result", "executor returned int, not a returns Result"),
    _executor("none", "executor returned NoneType, not a returns Result"),
    _executor("failure-of-exception", "No space left on device"),
    Case(
        "executor-log-secret",
        ("trigger", "unruly.log-secret"),
        0,
        ("postgresql://app:***@db/app",),
        writes=True,
        new_runs=("succeeded",),
    ),
    Case(
        "executor-job-cancelled-unasked",
        ("trigger", "unruly.job-cancelled"),
        1,
        ("cancelled",),
        writes=True,
        new_runs=("cancelled",),
    ),
]
