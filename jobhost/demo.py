"""``python -m jobhost.demo DIR``: a playground for a newcomer, with both bundled modules at work.

It makes, in DIR: ``files-root/`` (referenced files, old orphans, one young orphan, a symbolic
link leading out of root), ``app.db`` (the application's table of referenced paths) and
``jobhost.toml`` (the store, ``[modules.files]`` every minute, an HTTP ping that fails on
purpose, and the dashboard and ``/metrics`` served on a loopback port: 8089 when it is free, or
one the system picks). Running it again puts back what a cleanup moved away and makes the
orphans old again; it never touches the store (``jobhost.db``) nor the quarantine, so history
survives.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DemoLayout", "main", "make_demo"]

REFERENCED = ("avatars/alice.png", "avatars/bob.png", "invoices/2026/inv-0001.pdf")
"""Old files the application still references: kept."""
ORPHANS = ("avatars/carol-old.png", "invoices/2026/draft-0002.pdf", "tmp/upload-7f3a.bin")
"""Old files nothing references: quarantined by the first run."""
YOUNG_ORPHAN = "tmp/upload-in-progress.bin"
"""Unreferenced but only just written (an upload in flight): kept by ``min_age``."""
ESCAPE_LINK = "shortcut-to-outside"
"""A symbolic link from root to a file outside it: skipped, never followed."""
ESCAPING_REFERENCE = "../outside-root/keep-me.txt"
"""A reference that leads out of root: refused and counted."""

_OLD_SECONDS = 2 * 24 * 3600
_PORT = 8089
_QUERY = "SELECT path FROM file_references"


@dataclass(frozen=True)
class DemoLayout:
    directory: Path
    root: Path
    app_db: Path
    store_db: Path
    config: Path
    address: str
    """``127.0.0.1:PORT``, where the host serves the dashboard and ``/metrics``."""


def make_demo(directory: Path, *, now: float | None = None) -> DemoLayout:
    """Create or refresh the demo in ``directory``; ``now`` is a POSIX time (default: now)."""
    directory = directory.expanduser().resolve()
    layout = DemoLayout(
        directory=directory,
        root=directory / "files-root",
        app_db=directory / "app.db",
        store_db=directory / "jobhost.db",
        config=directory / "jobhost.toml",
        address=f"127.0.0.1:{_loopback_port()}",
    )
    moment = time.time() if now is None else now
    old = moment - _OLD_SECONDS
    for relative in (*REFERENCED, *ORPHANS):
        _write(layout.root / relative, f"demo file {relative}\n", old)
    _write(layout.root / YOUNG_ORPHAN, "half an upload\n", moment)
    outside = directory / "outside-root" / "keep-me.txt"
    _write(outside, "outside root: the cleanup must never touch this\n", old)
    link = layout.root / ESCAPE_LINK
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(outside, layout.root))
    with closing(sqlite3.connect(layout.app_db)) as connection, connection:
        connection.execute("CREATE TABLE IF NOT EXISTS file_references (path TEXT PRIMARY KEY)")
        connection.executemany(
            "INSERT OR IGNORE INTO file_references (path) VALUES (?)",
            [(path,) for path in (*REFERENCED, ESCAPING_REFERENCE)],
        )
    layout.config.write_text(_config(layout), encoding="utf-8")
    return layout


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in {"-h", "--help"}:
        print("usage: python -m jobhost.demo DIR", file=sys.stderr)
        return 2
    layout = make_demo(Path(args[0]))
    print(_summary(layout))
    return 0


def _write(path: Path, content: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(content, encoding="utf-8")
    os.utime(path, (mtime, mtime))


def _config(layout: DemoLayout) -> str:
    return f"""\
# Written by `python -m jobhost.demo`; running it again rewrites this file.
database_url = {_toml(f"sqlite:///{layout.store_db}")}
poll_interval = "5s"
# The dashboard and /metrics, on this machine only; the gauges read the store every 5s.
http_listen = {_toml(layout.address)}
metrics_refresh = "5s"

[modules.files]
root = {_toml(str(layout.root))}
references_url = {_toml(f"sqlite:///{layout.app_db}")}
references_query = {_toml(_QUERY)}
min_age = "1h"
cron = "* * * * *"
mode = "quarantine"

# Nothing listens on port 9: every run fails, is retried once after 5s, and shows in the report.
[[modules.http.jobs]]
name = "demo-ping"
interval = "20s"
url = "http://127.0.0.1:9/health"
max_attempts = 2
backoff = "5s"
"""


def _loopback_port() -> int:
    """8089 when nothing listens there, or a free port the system picks."""
    for wanted in (_PORT, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", wanted))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free loopback port")


def _toml(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _summary(layout: DemoLayout) -> str:
    quarantine = layout.root / ".jobhost-quarantine"
    # The console script beside this interpreter: the newcomer's shell may not have it on PATH.
    command = Path(sys.executable).parent / "jobhost"
    return f"""\
jobhost demo ready in {layout.directory}
  files-root/   {len(REFERENCED)} referenced files, {len(ORPHANS)} orphans 2 days old, \
1 young orphan, 1 symlink leading out of root
  app.db        table file_references ({len(REFERENCED)} paths, and 1 that leads out of root)
  jobhost.toml  store {layout.store_db.name}; files.orphan-cleanup every minute; \
http.demo-ping every 20s

The host starts now (python3 scripts/dev.py run) and serves, on this machine only:
  dashboard     http://{layout.address}/
  metrics       http://{layout.address}/metrics   (Prometheus: deploy/prometheus/, \
Grafana: deploy/grafana/jobhost.json)

In another terminal, try:
  {command} --config {layout.config} report
  {command} --config {layout.config} history files.orphan-cleanup
  {command} --config {layout.config} trigger files.orphan-cleanup --reason "try it"

You will see: files.orphan-cleanup succeed and move the {len(ORPHANS)} orphans to
  {quarantine}/<today>/, keeping the referenced files and the young upload, and counting the
  symlink and the escaping reference as skipped; http.demo-ping fail ("connection refused"),
  retried once 5s later, then fail again, each attempt in the report.
Run this command again to put the orphans back and replay it."""


if __name__ == "__main__":
    sys.exit(main())
