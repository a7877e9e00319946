"""jobhost_contracts.testing: an executor run as the host runs it, with no host and no store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from jobhost_contracts import Cancellation, JobContext, TriggerSource, UnitCounts
from jobhost_contracts.testing import MemoryState, run_job
from returns.result import Failure, Result, Success

NIGHT = datetime(2026, 3, 29, 2, 15, tzinfo=timezone(timedelta(hours=2)))


class Counter:
    def execute(self, context: JobContext) -> Result[int, str]:
        count = int(context.state.get("count") or 0) + 1
        context.state.set("count", str(count))
        context.logger.info("count is %d", count)
        return Success(count)


def test_an_executor_gets_the_context_a_host_builds() -> None:
    run = run_job(Counter(), occurrence=NIGHT, attempt=2, job_name="shop.count")

    context = run.context
    assert (run.result, run.outcome, run.log) == (Success(1), "succeeded", ["INFO count is 1"])
    assert context.occurrence == datetime(2026, 3, 29, 0, 15, tzinfo=UTC)
    assert context.idempotency_key == "shop.count:2026-03-29T00:15:00Z"
    assert (context.attempt, context.source) == (2, TriggerSource.RETRY)
    assert context.logger.name == "jobhost.job.shop.count"
    assert len(context.run_id) == 32


def test_a_manual_run_has_a_key_of_its_own_and_state_carries_over() -> None:
    state = MemoryState({"count": "41"})

    first = run_job(Counter(), state=state)
    second = run_job(Counter(), state=state)

    assert (first.result, second.result) == (Success(42), Success(43))
    assert first.context.source is TriggerSource.MANUAL
    assert first.context.idempotency_key == f"module.job:manual:{first.context.run_id}"


def test_the_run_job_fixture_shares_one_state_per_test(run_job, job_state) -> None:  # type: ignore[no-untyped-def]
    run_job(Counter())
    run_job(Counter())

    assert job_state.get("count") == "2"


def test_a_function_and_an_async_function_are_executors() -> None:
    def plain(context: JobContext) -> Result[str, str]:
        return Success(context.job_name)

    async def later(context: JobContext) -> Result[str, str]:
        await asyncio.sleep(0)
        return Failure("partner said no")

    assert run_job(plain, job_name="a.b").result == Success("a.b")
    run = run_job(later)
    assert (run.result, run.outcome) == (Failure("partner said no"), "failed")


def test_what_the_host_counts_as_failed_is_failed_here() -> None:
    def raises(context: JobContext) -> Result[None, str]:
        raise KeyError("tenant")

    def returns_a_dict(context: JobContext) -> dict[str, int]:
        return {"done": 1}

    raised = run_job(raises)
    wrong = run_job(returns_a_dict)  # type: ignore[arg-type]

    assert raised.outcome == "failed" and isinstance(raised.exception, KeyError)
    assert raised.log == ["ERROR raised KeyError: 'tenant'"]
    assert wrong.outcome == "failed"
    assert str(wrong.exception) == "executor returned dict, not a returns Result"


def test_a_timeout_and_a_shutdown_reach_the_executor() -> None:
    def waits(context: JobContext) -> Result[str, str]:
        context.cancellation.wait(5)
        context.cancellation.raise_if_cancelled()
        return Success("never")

    stopped = Cancellation()
    stopped.cancel("shutdown")

    assert run_job(waits, timeout=0.05).outcome == "timed_out"
    assert run_job(waits, cancellation=stopped).outcome == "cancelled"


def test_fan_out_marks_units_once_per_occurrence() -> None:
    def purge(context: JobContext) -> Result[UnitCounts, object]:
        return context.fan_out(["t1", "t2"], Success)

    state = MemoryState()
    first = run_job(purge, occurrence=NIGHT, state=state)
    retry = run_job(purge, occurrence=NIGHT, state=state, attempt=2)

    assert first.units == UnitCounts(total=2, succeeded=2, failed=0, skipped_already_done=0)
    assert retry.units == UnitCounts(total=2, succeeded=0, failed=0, skipped_already_done=2)


def test_the_section_is_read_only_and_state_takes_text() -> None:
    def writes(context: JobContext) -> Result[None, str]:
        context.config["batch_size"] = 5  # type: ignore[index]
        return Success(None)

    assert isinstance(run_job(writes, config={"batch_size": 1}).exception, TypeError)
    with pytest.raises(TypeError, match="strings"):
        MemoryState().set("count", 10)  # type: ignore[arg-type]


_AUTHOR_TEST = """
from datetime import UTC, datetime

from freezegun import freeze_time
from jobhost_contracts import JobContext
from jobhost_contracts.testing import MemoryState, run_job
from returns.result import Success


def remind(context: JobContext):
    since = context.state.get("since") or "never"
    context.state.set("since", (context.occurrence or datetime.now(UTC)).isoformat())
    context.logger.info("reminding since %s", since)
    return Success({"reminded": 10})


@freeze_time("2026-03-29T10:00:00Z")
def test_remind_keeps_its_watermark():
    state = MemoryState()
    run = run_job(remind, state=state, config={"reminder_after": "1h"})
    assert run.result == Success({"reminded": 10})
    assert run.log == ["INFO reminding since never"]
    assert state.get("since") == "2026-03-29T10:00:00+00:00"


def test_the_fixture(run_job):
    run_job(remind, occurrence=datetime(2026, 3, 29, tzinfo=UTC))
    assert run_job(remind).log == ["INFO reminding since 2026-03-29T00:00:00+00:00"]
"""
# No host, no store: the author's tests must not even import them.
_NO_HOST = """
import sys

class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"jobhost", "sqlalchemy", "alembic", "opentelemetry"}:
            raise ImportError(f"{name} imported by a module's tests")
        return None

sys.meta_path.insert(0, _Refuse())
"""


def test_a_module_authors_tests_pass_with_no_host_and_no_store(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_remind.py").write_text(textwrap.dedent(_AUTHOR_TEST))
    (tmp_path / "conftest.py").write_text(_NO_HOST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")}

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert not list(tmp_path.glob("*.db"))
