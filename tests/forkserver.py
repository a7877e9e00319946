"""Starting ``jobhost`` processes fast: import the CLI once, then fork one process per command.

Each command still runs in a process of its own, through ``jobhost.cli.main`` with its own
arguments, environment, working directory, standard output and standard error, and its exit
status is the process's; only the ~1 s of imports every ``python -m jobhost`` pays is paid once.
The server reads one JSON request per line on stdin and answers one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback


def _child(request: dict[str, object]) -> None:
    # The server's stdin carries the requests: a command reads an empty one, as under a test.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})  # type: ignore[call-overload]
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        handle = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    code = 0
    try:
        from jobhost.cli import main

        main([str(a) for a in request["argv"]])  # type: ignore[attr-defined]
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
    except BaseException:  # what the interpreter would print for an uncaught error
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.01)


def serve() -> None:
    import importlib

    import jobhost.cli._app as app

    for module in sorted(set(app._MODULES.values())):
        importlib.import_module(f"jobhost.cli.{module}")
    # What the commands import when they run: every child inherits it instead of paying again.
    for name in (
        "jobhost.catalog",
        "jobhost.envelope.reporting",
        "jobhost.firing.host",
        "jobhost.operations.health",
        "jobhost.operations.runs",
        "jobhost.operations.plan",
        "jobhost.operations.render",
        "jobhost.operations.report",
        "jobhost.operations.jobs",
        "jobhost.store.migrate",
        "jobhost.web",
    ):
        importlib.import_module(name)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        code = _wait(pid, float(request.get("timeout", 120)))
        print(json.dumps({"code": code}), flush=True)


if __name__ == "__main__":
    serve()
