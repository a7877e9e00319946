"""A function may stand where an executor does; ``validate`` checks that either can take the
context. Run as real ``jobhost`` processes on an SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_PLUGIN = """\
import asyncio
from datetime import timedelta

from returns.result import Failure, Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


def remind(context):
    context.logger.info("reminding for %s", context.job_name)
    return Success({"reminded": 10})


async def settle(context):
    await asyncio.sleep(0)
    return Failure("the ledger does not balance")


class Forgetful:
    def execute(self):
        return Success(None)


def lonely():
    return Success(None)


def job(name, executor):
    declaration = BackgroundJobDeclaration(name=name, module="shop", interval=timedelta(hours=1))
    return JobRegistration(declaration, executor)


@hookimpl
def jobhost_jobs(settings):
    jobs = [job("shop.remind", remind), job("shop.settle", settle)]
    if settings.get("shop", {}).get("broken"):
        jobs += [job("shop.forgetful", Forgetful()), job("shop.lonely", lonely)]
    return jobs
"""


def _env(tmp_path: Path, *, broken: bool = False) -> dict[str, str]:
    (tmp_path / "shop.py").write_text(_PLUGIN)
    config = tmp_path / "jobhost.toml"
    config.write_text(
        f'database_url = "sqlite:///{tmp_path / "store.db"}"\n'
        f'plugins = ["{tmp_path / "shop.py"}"]\n'
        f"[modules.shop]\nbroken = {'true' if broken else 'false'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}
    env["JOBHOST_CONFIG"] = str(config)
    env["JOBHOST_LOAD_PLUGINS"] = ""
    return env


def _jobhost(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_executor_that_cannot_take_the_context_is_named_with_the_fix(tmp_path: Path) -> None:
    done = _jobhost(_env(tmp_path, broken=True), "validate")

    assert done.returncode == 3, done.stdout + done.stderr
    assert (
        "shop.forgetful (module shop) [bad-executor]: executor Forgetful.execute(self) cannot "
        "be called with the run's context: the host calls it with exactly one argument, the "
        "context; write def execute(self, context: JobContext) -> Result"
    ) in done.stdout
    assert (
        "shop.lonely (module shop) [bad-executor]: executor function lonely() cannot be called "
        "with the run's context"
    ) in done.stdout
    assert "write def lonely(context: JobContext) -> Result" in done.stdout
    assert "Traceback" not in done.stderr


def test_functions_pass_validate_and_run_on_trigger(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _jobhost(env, "validate").returncode == 0
    assert _jobhost(env, "db", "upgrade").returncode == 0

    ran = _jobhost(env, "trigger", "shop.remind", "--json")
    failed = _jobhost(env, "trigger", "shop.settle", "--json")

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["outcome"] == "succeeded"
    assert failed.returncode == 1, failed.stdout + failed.stderr
    result = json.loads(failed.stdout)
    assert (result["outcome"], result["error"]) == ("failed", "the ledger does not balance")
    history = _jobhost(env, "history", "shop.remind", "--json")
    assert history.returncode == 0, history.stderr
    (run,) = json.loads(history.stdout)["runs"]
    assert (run["outcome"], run["result"]) == ("succeeded", {"reminded": 10})
    text = _jobhost(env, "history", "shop.remind")
    assert '    result: {"reminded":10}' in text.stdout.splitlines()
    logs = _jobhost(env, "logs", run["run_id"][:8])
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.rstrip().endswith("INFO     reminding for shop.remind")
