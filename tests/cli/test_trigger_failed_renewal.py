"""A run in ``jobhost trigger``'s own process outlives a failing heartbeat, as on any host: the
one-shot host keeps trying to renew the lease, and the run ends and is recorded. Only a Ctrl-C
abandons a run to its lease."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.cli.operator_support import Operator

# Runs ``jobhost`` with every heartbeat that renews leases failing, as a store refusing it
# would; the host's last beat, which only says it stopped, goes through.
_LAUNCHER = textwrap.dedent(
    """\
    import runpy
    import sys

    from jobhost.store import Store
    from jobhost.store.ledger import beat


    def refused(store, *args, stopped=False, **kwargs):
        if stopped:
            return beat(store._engine, *args, stopped=True, **kwargs)
        raise RuntimeError("the renewal was refused")


    Store.beat = refused
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
    assert done.returncode == 0, done.stderr
    assert "the renewal was refused" in done.stderr  # said, as a host says it
    assert "Traceback" not in done.stderr
    # The run slept its 3 s to the end and was recorded, not cut off.
    assert [run.outcome for run in operator.runs("sample.slow")] == ["succeeded"]
