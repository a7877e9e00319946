"""``jobhost`` with SQL counted: ``python benchmarks/_scale_host.py run`` is ``jobhost run``.

Before handing over to the ``jobhost`` command, it listens to SQLAlchemy's own events on every
engine of the process (statements executed, transactions begun) and writes the counts, per
thread, to the JSON file named by ``BENCH_SQL_COUNTS`` every half second. A *burst* is a run of
statements on one thread with less than ``_GAP`` seconds between them: on an idle host each loop
turn and each heartbeat is one burst, whatever the engine's internals look like. ``held_us`` is
the time from BEGIN to COMMIT or ROLLBACK, summed per thread: how long transactions (and the
row locks they take) are held. ``full_collections`` lists each full (generation 2) collection of
the cyclic garbage collector as ``[end, microseconds]`` (``end`` in seconds since the epoch): the
loop's longest pauses that are not its own work.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_GAP = 0.1
_POOL_SUFFIX = re.compile(r"[-_]\d+(_\d+)?$")
_lock = threading.Lock()
_statements: Counter[str] = Counter()
_transactions: Counter[str] = Counter()
_bursts: Counter[str] = Counter()
_last: dict[str, float] = {}
_held: Counter[str] = Counter()
"""Microseconds between BEGIN and COMMIT/ROLLBACK, per thread group: how long locks are held."""
_began: dict[int, float] = {}
_texts: Counter[str] = Counter()
"""With ``BENCH_SQL_TEXTS`` set: statements counted by thread group and their first words."""
_TEXTS = bool(os.environ.get("BENCH_SQL_TEXTS"))
_full_collections: list[list[float]] = []
_full_began = [0.0]


def _thread() -> tuple[str, str]:
    name = threading.current_thread().name
    # Worker threads are counted together: "ThreadPoolExecutor-0_3" -> "ThreadPoolExecutor".
    return name, _POOL_SUFFIX.sub("", name)


def _on_statement(*args: Any) -> None:
    name, group = _thread()
    now = time.monotonic()
    with _lock:
        _statements[group] += 1
        if _TEXTS:
            _texts[f"{group}: {' '.join(str(args[2]).split())[:90]}"] += 1
        if now - _last.get(name, float("-inf")) > _GAP:
            _bursts[group] += 1
        _last[name] = now


def _on_begin(*_args: Any) -> None:
    _, group = _thread()
    _began[threading.get_ident()] = time.perf_counter()
    with _lock:
        _transactions[group] += 1


def _on_end(*_args: Any) -> None:
    began = _began.pop(threading.get_ident(), None)
    if began is None:
        return
    _, group = _thread()
    with _lock:
        _held[group] += round((time.perf_counter() - began) * 1e6)


def _on_collection(phase: str, info: dict[str, int]) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        _full_began[0] = time.perf_counter()
    else:
        took = round((time.perf_counter() - _full_began[0]) * 1e6)
        _full_collections.append([time.time(), took])


def _dump(path: str) -> None:
    with _lock:
        body = {
            "full_collections": list(_full_collections),
            "statements": dict(_statements),
            "transactions": dict(_transactions),
            "bursts": dict(_bursts),
            "held_us": dict(_held),
            **({"texts": dict(_texts)} if _TEXTS else {}),
            # Native ids, so a reader of /proc/PID/task can name each thread's wake-ups.
            "threads": {str(t.native_id): t.name for t in threading.enumerate()},
        }
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(body, handle)
    os.replace(temporary, path)


def _dump_forever(path: str) -> None:
    while True:
        time.sleep(0.5)
        _dump(path)


def main() -> None:
    path = os.environ["BENCH_SQL_COUNTS"]
    event.listen(Engine, "before_cursor_execute", _on_statement)
    event.listen(Engine, "begin", _on_begin)
    event.listen(Engine, "commit", _on_end)
    event.listen(Engine, "rollback", _on_end)
    threading.Thread(target=_dump_forever, args=(path,), daemon=True, name="bench-dump").start()
    atexit.register(_dump, path)
    gc.callbacks.append(_on_collection)
    from jobhost.cli import main as jobhost

    sys.argv = ["jobhost", *sys.argv[1:]]
    jobhost()


if __name__ == "__main__":
    main()
