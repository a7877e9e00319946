"""``jobhost`` commands for tests: each in a process of its own, forked from a warm server.

A fresh ``python -m jobhost`` pays about a second of imports before it does anything; the suite
runs hundreds of commands. ``tests/forkserver.py`` imports the CLI once and forks one process per
command, with the command's own arguments, environment, working directory and output files, so
what a test sees (exit status, stdout, stderr, files, the store) is the command's. Tests about
how the command starts (imports, ``--help`` speed, the entry point) start it from scratch.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["jobhost_command"]

_SERVER = Path(__file__).parent / "forkserver.py"
_REPO = Path(__file__).parent.parent


def jobhost_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``jobhost ARGV`` as a child process, like ``subprocess.run(..., capture_output=True,
    text=True)``; raises ``subprocess.TimeoutExpired`` when it outlives ``timeout``."""
    args = [sys.executable, "-m", "jobhost", *argv]
    with tempfile.TemporaryDirectory(prefix="jobhost-command-") as directory:
        out, err = Path(directory) / "stdout", Path(directory) / "stderr"
        request = {
            "argv": list(argv),
            "env": dict(env),
            "cwd": str(cwd or os.getcwd()),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
        }
        began = time.monotonic()
        code = _servers.run(request)
        read = {"encoding": "utf-8", "errors": "replace"}
        stdout, stderr = out.read_text(**read), err.read_text(**read)
    if code == -9 and time.monotonic() - began >= timeout:
        raise subprocess.TimeoutExpired(args, timeout, stdout, stderr)
    return subprocess.CompletedProcess(args, code, stdout, stderr)


class _Servers:
    """Warm fork servers, started on first use: one per command running at the same time."""

    def __init__(self) -> None:
        self._idle: queue.SimpleQueue[subprocess.Popen[str]] = queue.SimpleQueue()
        self._all: list[subprocess.Popen[str]] = []

    def run(self, request: dict[str, object]) -> int:
        server = self._take()
        try:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            answer = server.stdout.readline()
        except BaseException:
            server.kill()  # in an unknown state: never handed out again
            raise
        if not answer:
            raise RuntimeError(f"the fork server died; exit status {server.wait()}")
        self._idle.put(server)
        return int(json.loads(answer)["code"])

    def close(self) -> None:
        for server in self._all:
            if server.stdin is not None:
                server.stdin.close()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
            if server.stdout is not None:
                server.stdout.close()

    def _take(self) -> subprocess.Popen[str]:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        # The server's own environment is a command's plain one; each command brings its own.
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
        server = subprocess.Popen(
            [sys.executable, str(_SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=_REPO,
            env={**clean, "JOBHOST_LOAD_PLUGINS": ""},
        )
        self._all.append(server)
        return server


_servers = _Servers()
atexit.register(_servers.close)


def register_commands() -> None:
    """Import every command's module, as running each command does: the whole CLI at once."""
    from jobhost.cli._app import _MODULES

    for module in sorted(set(_MODULES.values())):
        importlib.import_module(f"jobhost.cli.{module}")
