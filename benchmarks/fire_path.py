"""The files one scheduled fire crosses: ``python benchmarks/fire_path.py``.

Runs ``jobhost run`` in this process on a fresh SQLite store with one every-second job (the
plugin of ``benchmarks/scale.py``), lets it start and fire a few times, then watches every
thread for ``--seconds``: each call into the host's own code (``jobhost/``, the contracts) is
noted once, as ``file:function`` in the order first seen. What one fire crosses is what a
steady host calls between fires, start-up excluded: the loop's claim, the worker's envelope,
the recorder's ledger write, the heartbeat. Prints the steps and the count of distinct files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_PRODUCT = (str(ROOT / "jobhost") + "/", "jobhost_contracts/")


def main() -> None:
    arguments = _arguments()
    directory = Path(tempfile.mkdtemp(prefix="fire-path-"))
    config = directory / "host.toml"
    config.write_text(
        f"database_url = {json.dumps(f'sqlite:///{directory}/store.db')}\n"
        f"plugins = [{json.dumps(str(HERE / '_scale_plugin.py'))}]\n"
        'log_level = "WARNING"\nshutdown_grace = "2s"\n'
        '[modules.bench]\njobs = 1\nshape = "every-second"\n'
        f"log_dir = {json.dumps(str(directory))}\n"
    )
    from jobhost.cli import main as cli

    seen: dict[tuple[str, str], None] = {}
    watching = threading.Event()

    def note(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and watching.is_set():
            name = frame.f_code.co_filename
            if name.startswith(_PRODUCT[0]) or _PRODUCT[1] in name:
                seen.setdefault((_short(name), frame.f_code.co_name), None)

    def watch() -> None:
        time.sleep(arguments.warmup)
        watching.set()
        time.sleep(arguments.seconds)
        watching.clear()
        _print(seen, arguments.seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    # The host runs on the main thread (it handles signals); set before it starts, the profile
    # watches every thread it starts too.
    threading.Thread(target=watch, daemon=True).start()
    threading.setprofile(note)
    sys.setprofile(note)
    with contextlib.suppress(SystemExit):
        cli(["--config", str(config), "run"])


def _print(seen: dict[tuple[str, str], None], seconds: float) -> None:
    files: dict[str, None] = {}
    for file, function in seen:
        files.setdefault(file, None)
        print(f"{file}:{function}")
    print(f"\n{len(files)} files, {len(seen)} functions, over {seconds} s of firing")
    for file in files:
        print(f"  {file}")


def _short(name: str) -> str:
    if _PRODUCT[1] in name:
        return "contracts/" + name.split(_PRODUCT[1], 1)[1]
    return name.removeprefix(str(ROOT) + "/")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=float, default=6.0, help="seconds before watching")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds watched")
    return parser.parse_args()


if __name__ == "__main__":
    main()
