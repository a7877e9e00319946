"""A doorbell beside an SQLite file: processes sharing the store wake each other at no cost.

An SQLite store is shared only by processes on one machine, so each process that waits for the
hosts' signal binds a Unix datagram socket in a directory beside the file (``jobhost.db`` ->
``jobhost.db-signals/``), and a writer whose transaction signalled rings every socket there
once it has committed. A waiter sleeps in ``recv`` until rung: an idle store costs no wake-up,
and a ring reaches the waiter at once.

A socket whose process died is found by the next ring (the kernel refuses the datagram) and
removed. Where the mechanism is unavailable (no ``AF_UNIX``, a directory this process may not
write, a path longer than a socket address holds), :meth:`Doorbell.open` answers None and the
caller polls instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
from pathlib import Path

__all__ = ["Doorbell", "ring"]

_SUFFIX = "-signals"
_LONGEST_ADDRESS = 100
"""Bytes of a socket path every platform takes (Linux 107, macOS and the BSDs 103)."""


def ring(store: Path) -> None:
    """Wake every process waiting beside the SQLite file ``store``; call after the commit."""
    directory = _directory(store)
    try:
        names = os.listdir(directory)
    except OSError:
        return  # nobody has ever waited beside this store
    if not names or not hasattr(socket, "AF_UNIX"):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for name in names:
            _ring_one(sender, directory / name)


class Doorbell:
    """This process's socket beside a store file; wait on it for the next ring."""

    def __init__(self, path: Path, sock: socket.socket) -> None:
        self._path = path
        self._socket = sock

    @classmethod
    def open(cls, store: Path) -> Doorbell | None:
        """A bound doorbell, or None where the mechanism is unavailable (poll instead)."""
        if not hasattr(socket, "AF_UNIX"):
            return None
        directory = _directory(store)
        path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock"
        if len(os.fsencode(path)) > _LONGEST_ADDRESS:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            mode = _store_mode(store)
            _make_directory(directory, mode)
            sock.bind(str(path))
            # As SQLite gives its -wal and -shm files: whoever may write the store may ring.
            os.chmod(path, mode)
        except OSError:
            sock.close()
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return cls(path, sock)

    def wait(self, timeout: float | None) -> bool:
        """Sleep until rung or ``timeout`` seconds (None: no limit); whether it was rung.
        Rings that arrived meanwhile count as one."""
        self._socket.settimeout(timeout)
        try:
            self._socket.recv(16)
        except TimeoutError:
            return False
        self._socket.setblocking(False)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while True:
                self._socket.recv(16)
        return True

    def interrupt(self) -> None:
        """Ring this doorbell alone: a waiter on another thread of this process returns."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            _ring_one(sender, self._path)

    def close(self) -> None:
        self._socket.close()
        with contextlib.suppress(OSError):
            self._path.unlink()


def _ring_one(sender: socket.socket, path: Path) -> None:
    try:
        sender.sendto(b"!", str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        # Its process has gone: nobody will read it again.
        if path.suffix == ".sock":
            with contextlib.suppress(OSError):
                path.unlink()
    except OSError:
        pass  # its queue is full (a ring is already waiting) or it is not ours to ring


def _directory(store: Path) -> Path:
    return store.with_name(f"{store.name}{_SUFFIX}")


def _store_mode(store: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(store).st_mode) & 0o666
    except OSError:
        return 0o644  # not created yet: SQLite makes it 0644 under the usual umask


def _make_directory(directory: Path, mode: int) -> None:
    # Searchable wherever readable: a user who may read the store may list the doorbells.
    wanted = mode | 0o700 | ((mode & 0o444) >> 2)
    try:
        directory.mkdir()
    except FileExistsError:
        return
    with contextlib.suppress(OSError):
        os.chmod(directory, wanted)
