#!/usr/bin/env python3
"""Set up a local virtual environment and run jobhost or its tests.

    python3 scripts/dev.py run     # start a host on the embedded SQLite default, bundled modules
    python3 scripts/dev.py test    # lint, type-check and run the whole test suite

Both create or reuse `.venv/` beside this repository and install the project into it from the
pinned versions in `constraints.txt`, so a fresh machine with only python3 needs nothing else.
Extra arguments after `run` go to `jobhost run`; after `test`, to pytest.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
PACKAGES = ["contracts", "modules/files", "modules/http", "modules/publish", ".[test]"]
_STAMP = VENV / ".installed"
POSTGRES_ENV = "JOBHOST_TEST_POSTGRES_URL"
LOCAL_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test", "install", "lint"}:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    _ensure_environment()
    if command == "install":
        return 0
    if command == "lint":
        return _lint()
    if command == "test":
        if not os.environ.get(POSTGRES_ENV):
            os.environ[POSTGRES_ENV] = LOCAL_POSTGRES
            print(f"{POSTGRES_ENV} not set; using {LOCAL_POSTGRES}", file=sys.stderr)
        return _lint() or _run([str(BIN / "pytest"), *rest])
    return _run_demo(rest)


def _run_demo(rest: list[str]) -> int:
    demo = ROOT / "demo"
    code = _run([str(BIN / "python"), "-m", "jobhost.demo", str(demo)])
    if code:
        return code
    env = {**os.environ, "JOBHOST_CONFIG": str(demo / "jobhost.toml")}
    os.chdir(demo)
    os.execve(str(BIN / "jobhost"), [str(BIN / "jobhost"), "run", *rest], env)
    return 0  # pragma: no cover - execve does not return


def _lint() -> int:
    return (
        _run([str(BIN / "ruff"), "check", "."])
        or _run([str(BIN / "ruff"), "format", "--check", "."])
        or _run([str(BIN / "mypy")])
    )


def _ensure_environment() -> None:
    if not (BIN / "python").exists():
        print(f"creating virtual environment in {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = _fingerprint()
    if _STAMP.exists() and _STAMP.read_text() == wanted:
        return
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    _check([*pip, "install", "-c", "constraints.txt", "pip==25.3"])
    _check([*pip, "install", "-c", "constraints.txt", *(f"-e{p}" for p in PACKAGES)])
    _STAMP.write_text(wanted)


def _fingerprint() -> str:
    """Reinstall whenever a dependency list changes, never otherwise."""
    digest = hashlib.sha256()
    for name in [
        "constraints.txt",
        "pyproject.toml",
        *(f"{p}/pyproject.toml" for p in PACKAGES[:-1]),
    ]:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def _run(command: list[str]) -> int:
    return subprocess.call(command, cwd=ROOT)


def _check(command: list[str]) -> None:
    code = _run(command)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
