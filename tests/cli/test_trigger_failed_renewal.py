"""A run in ``jobhost trigger``'s own process outlives a failure of the command around it: when
a lease renewal fails, the command says it waits, lets the run end and be recorded, then fails
with the renewal's error. Only a Ctrl-C abandons a run to its lease."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.cli.operator_support import Operator

# Runs ``jobhost`` with every lease renewal of a run here failing, as a store refusing it would.
_LAUNCHER = textwrap.dedent(
    """\
    import runpy
    import sys

    import jobhost.operations.inprocess as inprocess


    def refused(*args, **kwargs):
        raise RuntimeError("the renewal was refused")


    inprocess.renew_watching_cancel = refused
    sys.argv[0] = "jobhost"
    runpy.run_module("jobhost", run_name="__main__", alter_sys=True)
    """
)


def test_a_failed_renewal_lets_the_run_end_and_be_recorded(operator: Operator) -> None:
    job = {"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 3}
    operator.configure([job], heartbeat_interval="1s")
    launcher = operator.directory / "refusing_launcher.py"
    launcher.write_text(_LAUNCHER)
    command = [sys.executable, str(launcher), "--config", str(operator.config)]
    done = subprocess.run(
        [*command, "trigger", "sample.slow"],
        env=operator.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "waiting for the run to end before exiting" in done.stderr
    assert "the renewal was refused" in done.stderr
    # The run slept its 3 s to the end and was recorded, not cut off by the exit.
    assert [run.outcome for run in operator.runs("sample.slow")] == ["succeeded"]
