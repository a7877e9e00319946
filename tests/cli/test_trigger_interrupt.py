"""Ctrl-C at every step of a run in ``jobhost trigger``'s own process cancels the run.

The command is a real process; a small launcher wraps one step of the one-shot host's start and
first claim so that the process sends itself SIGINT right there, the way an operator's Ctrl-C
can land between two statements. Whatever the step, the run ends ``cancelled`` in the ledger
(never left ``running`` until its lease ends), the command says so and exits 1, and nothing
prints a traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.cli.operator_support import Operator

# Runs ``jobhost`` with one step wrapped: ``before`` or ``after`` it, the process interrupts
# itself. The steps are the ones from the one-shot host's making to the supervision of the run.
_LAUNCHER = textwrap.dedent(
    """\
    import runpy
    import signal
    import sys

    import jobhost.cli._one_shot as one_shot
    import jobhost.firing.slots as slots
    from jobhost.store import Store

    owner, name, when = sys.argv[1:4]
    del sys.argv[1:4]
    module = {"one_shot": one_shot, "store": Store, "slots": slots}[owner]
    # A store method is a descriptor on the class: the wrapper binds it to the store it is
    # called on.
    step = module.__dict__[name]


    def interrupted(*args, **kwargs):
        if when == "before":
            signal.raise_signal(signal.SIGINT)
        if owner == "store":
            made = step.__get__(args[0], Store)(*args[1:], **kwargs)
        else:
            made = step(*args, **kwargs)
        if when == "after":
            signal.raise_signal(signal.SIGINT)
        return made


    setattr(module, name, interrupted)
    sys.argv[0] = "jobhost"
    runpy.run_module("jobhost", run_name="__main__", alter_sys=True)
    """
)

STEPS = [
    ("one_shot", "configure_telemetry", "before"),
    ("one_shot", "Host", "after"),
    ("store", "claim", "before"),
    ("store", "claim", "after"),
    ("slots", "lease_for", "after"),  # the run is held, its worker not yet started
    ("one_shot", "_supervise", "before"),
]


@pytest.mark.parametrize(("owner", "name", "when"), STEPS, ids=["-".join(s) for s in STEPS])
def test_ctrl_c_at_any_step_of_a_run_here_cancels_the_run(
    operator: Operator, owner: str, name: str, when: str
) -> None:
    operator.configure(
        [{"name": "sample.slow", "cron": "0 3 * * *", "behaviour": "sleep", "seconds": 60}]
    )
    launcher = operator.directory / "interrupting_launcher.py"
    launcher.write_text(_LAUNCHER)
    command = [sys.executable, str(launcher), owner, name, when]
    child = subprocess.Popen(
        [*command, "--config", str(operator.config), "trigger", "sample.slow"],
        env=operator.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A run left to its worker would hold the process for the job's 60 seconds.
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
        child.communicate()  # closes the pipes: a failure here is not a warning in the next test
    assert child.returncode == 1, stderr
    assert "interrupted: cancelling the run" in stderr
    assert "Traceback" not in stderr
    assert stdout.startswith("cancelled: sample.slow")
    assert [r.outcome for r in operator.runs("sample.slow")] == ["cancelled"]
