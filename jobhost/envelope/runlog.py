"""Run logs: every record a job writes through ``context.logger``, kept with its run.

A job's thread only appends to its run's buffer; a writer thread stores the buffers, redacted,
about once a second (what a killed host's run wrote survives up to the last flush). Each run
keeps its first lines and a window of its last; the lines between are counted, never stored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, TypeAlias

from jobhost_contracts.redaction import ERROR_TEXT_LIMIT

from jobhost.config import bound_text, redact_text
from jobhost.config.redaction import needs_redaction
from jobhost.records import Chunk, LogWrites, chunk
from jobhost.store import Store

__all__ = [
    "JobLogger",
    "RunLog",
    "RunLogWriter",
    "current_run",
    "running",
    "storable_text",
]

_log = logging.getLogger("jobhost.envelope")
_JOB_LOGGER = "jobhost.job"
_FLUSH_SECONDS = 1.0
_WAKE_LINES = 200
"""Head lines waiting that wake the writer before its next tick."""
_RAW_LIMIT = 16_000
"""Characters of one line held in memory before redaction (it is cut shorter when stored)."""

_current: ContextVar[RunLog | None] = ContextVar("jobhost_run_log", default=None)


def current_run() -> RunLog | None:
    return _current.get()


@contextmanager
def running(run_log: RunLog) -> Iterator[None]:
    token = _current.set(run_log)
    try:
        yield
    finally:
        _current.reset(token)


class RunLog:
    """One run's lines not yet written: the first up to half the bounds, then a window of the
    last."""

    def __init__(
        self,
        run_id: str,
        job_name: str,
        attempt: int,
        *,
        max_lines: int,
        max_bytes: int,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.run_id = run_id
        self.job_name = job_name
        self.attempt = attempt
        self.wake = wake
        self.flush_lock = threading.Lock()
        """Held from taking lines to committing them: batches of one run land in order."""
        self._lock = threading.Lock()
        self._head_lines = max_lines - max_lines // 2
        self._head_bytes = max_bytes - max_bytes // 2
        self._tail_lines = max_lines // 2
        self._tail_bytes = max_bytes // 2
        self._line_limit = max(min(4000, max_bytes // 8), 80)
        self._kept_limit = self._line_limit * 4
        """The most of a line's size that counts against the bounds (longer lines are cut)."""
        self._seq = 0
        self._offset = 0
        self._head_count = 0
        self._head_size = 0
        self._head_last = 0
        self._head_full = False
        self._pending: list[_Raw] = []
        self._tail: deque[_Raw] = deque()
        self._tail_size = 0
        self._tail_written = 0
        """The newest tail line written; tail lines at or below it are in the store."""
        self._written_chunks: deque[tuple[int, int]] = deque()
        """The first and last line of each stored row of the tail, oldest first."""
        self._closed = False

    def add(self, created: float, level: str, message: str) -> bool:
        """Keep a line (or count it); True when enough lines wait to wake the writer."""
        # For every line a job writes: locals, no helper calls, no dataclass.
        size = len(message) if message.isascii() else len(message.encode("utf-8", "replace"))
        if size > _RAW_LIMIT and len(message) > _RAW_LIMIT:
            message = message[:_RAW_LIMIT]
        kept = size if size < self._kept_limit else self._kept_limit
        with self._lock:
            if self._closed:
                return False
            seq = self._seq = self._seq + 1
            raw = _new_raw(_Raw, (seq, created, level, message, self._offset, size))
            self._offset += size
            if (
                not self._head_full
                and self._head_count < self._head_lines
                and self._head_size + kept <= self._head_bytes
            ):
                self._head_count += 1
                self._head_size += kept
                self._head_last = seq
                pending = self._pending
                pending.append(raw)
                return len(pending) >= _WAKE_LINES
            self._head_full = True
            self._tail.append(raw)
            self._tail_size += kept
            while self._tail and (
                len(self._tail) > self._tail_lines or self._tail_size > self._tail_bytes
            ):
                self._tail_size -= min(self._tail.popleft().size, self._kept_limit)
            return False

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def take(self) -> _Batch:
        """The lines to write now; nothing changes until :meth:`written` says they are."""
        with self._lock:
            head = list(self._pending)
            first = self._tail[0].seq if self._tail else self._seq + 1
            trim: tuple[int, int] | None = None
            again: list[_Raw] = []
            if self._written_chunks and self._written_chunks[0][0] < first:
                # Tail rows written earlier that later lines have pushed out; the row that still
                # holds kept lines goes too, and those lines are written again as a row.
                trim = (self._head_last, first)
                end = max(last for start, last in self._written_chunks if start < first)
                again = [raw for raw in self._tail if raw.seq <= end]
            tail = [raw for raw in self._tail if raw.seq > self._tail_written]
            newest = self._tail[-1].seq if self._tail else self._tail_written
            return _Batch(self, head, again, tail, trim, newest)

    def written(self, batch: _Batch) -> None:
        with self._lock:
            del self._pending[: len(batch.head)]
            self._tail_written = max(self._tail_written, batch.tail_newest)
            if batch.trim is not None:
                below = batch.trim[1]
                while self._written_chunks and self._written_chunks[0][0] < below:
                    self._written_chunks.popleft()
                if batch.again:
                    self._written_chunks.appendleft((batch.again[0].seq, batch.again[-1].seq))
            if batch.tail:
                self._written_chunks.append((batch.tail[0].seq, batch.tail[-1].seq))

    @property
    def empty(self) -> bool:
        with self._lock:
            return not self._pending and (
                not self._tail or self._tail[-1].seq <= self._tail_written
            )


class RunLogWriter:
    def __init__(
        self,
        store: Store,
        *,
        max_lines: int,
        max_bytes: int,
        level: str | int | None = None,
        flush_seconds: float = _FLUSH_SECONDS,
    ) -> None:
        self._store = store
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._flush_seconds = flush_seconds
        self._open: dict[str, RunLog] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        _install_capture(level)

    def open(self, run_id: str, job_name: str, attempt: int) -> RunLog:
        run_log = RunLog(
            run_id,
            job_name,
            attempt,
            max_lines=self._max_lines,
            max_bytes=self._max_bytes,
            wake=self._wake.set,
        )
        with self._lock:
            self._open[run_id] = run_log
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._loop, name="jobhost-run-logs", daemon=True
                )
                self._thread.start()
        return run_log

    @contextmanager
    def finishing(self, run_logs: Sequence[RunLog]) -> Iterator[LogWrites]:
        """The last lines of runs that have ended, to write in the transaction (committed inside
        the block) that records their outcomes."""
        for run_log in run_logs:
            run_log.close()
        with self._taking(run_logs, wait=True) as writes:
            yield writes
        with self._lock:
            for run_log in run_logs:
                if run_log.empty:
                    self._open.pop(run_log.run_id, None)

    def close(self) -> None:
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(10)
        try:
            self._flush_open()
        except Exception as error:
            _log.warning("could not write the last run log lines: %s", type(error).__name__)

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.wait(self._flush_seconds)
            self._wake.clear()
            try:
                self._flush_open()
            except Exception as error:  # kept in the buffers (bounded); written next time
                _log.warning(
                    "could not write run log lines (%s); kept, retrying", type(error).__name__
                )
                time.sleep(self._flush_seconds)

    def _flush_open(self) -> None:
        with self._lock:
            live = list(self._open.values())
        with self._taking(live, wait=False) as writes:
            if writes.trims or writes.chunks:
                self._store.record_finished(writes)  # lines only: these runs go on

    @staticmethod
    @contextmanager
    def _taking(run_logs: Sequence[RunLog], *, wait: bool) -> Iterator[LogWrites]:
        """The lines of ``run_logs`` to write now, under their flush locks taken in the order of
        their ids (callers never wait crosswise); without ``wait`` a locked run is skipped (its
        recorder writes it). On an error in the block the lines stay for the next try."""
        locked: list[RunLog] = []
        try:
            for run_log in sorted(run_logs, key=lambda run_log: run_log.run_id):
                if run_log.flush_lock.acquire(blocking=wait):
                    locked.append(run_log)
            batches = [b for b in (r.take() for r in locked) if b.head or b.tail or b.trim]
            yield LogWrites(
                trims=[(b.run_log.run_id, *b.trim) for b in batches if b.trim is not None],
                chunks=[row for b in batches for row in b.chunks()],
            )
            for batch in batches:
                batch.run_log.written(batch)
        finally:
            for run_log in locked:
                run_log.flush_lock.release()


class _Raw(NamedTuple):
    # A tuple, not a frozen dataclass: one is made for every line a job writes (by
    # ``_new_raw``, which skips the Python-level ``__new__`` of a NamedTuple).
    seq: int
    created: float
    level: str
    message: str
    offset: int
    size: int


_new_raw = tuple.__new__


@dataclass(frozen=True, slots=True)
class _Batch:
    run_log: RunLog
    head: list[_Raw]
    again: list[_Raw]
    """Kept lines of a stored row that :attr:`trim` deletes, written again."""
    tail: list[_Raw]
    trim: tuple[int, int] | None
    tail_newest: int

    def chunks(self) -> list[Chunk]:
        return [self._chunk(raws) for raws in (self.head, self.again, self.tail) if raws]

    def _chunk(self, raws: list[_Raw]) -> Chunk:
        limit = self.run_log._line_limit
        lines = [
            (int(raw.created * 1_000_000), raw.level, raw.size, _storable(raw.message, limit))
            for raw in raws
        ]
        return chunk(self.run_log.run_id, raws[0].seq, raws[0].offset, lines)


def _storable(message: str, limit: int) -> str:
    # Most lines are short plain ASCII with no credential: nothing to redact, cut or spell out.
    plain = message.isascii() and "\x00" not in message and not needs_redaction(message)
    if plain and len(message) <= limit:
        return message
    return storable_text(message, limit) or ""


def storable_text(message: str | None, limit: int = ERROR_TEXT_LIMIT) -> str | None:
    """A job's text as the store keeps it: redacted, cut to ``limit``, NUL and lone surrogates
    spelled out (the database refuses them, and a run's record must not be lost to them)."""
    if not message:
        return None
    text = bound_text(redact_text(message), limit)
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class _CaptureHandler(logging.Handler):
    def handle(self, record: logging.LogRecord) -> bool:
        # No handler-wide lock: each run's buffer has its own, so jobs never wait on each other.
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        run_log = _current.get()
        if run_log is None:
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{_FORMATTER.formatException(record.exc_info)}"
            elif record.exc_text:
                message = f"{message}\n{record.exc_text}"
            if run_log.add(record.created, record.levelname, message):
                run_log.wake()
        except Exception:
            self.handleError(record)


_FORMATTER = logging.Formatter()
_LEVELS = logging.getLevelNamesMapping()
_HANDLER = _CaptureHandler()
_installed = threading.Lock()


def _install_capture(level: str | int | None) -> None:
    with _installed:
        logger = logging.getLogger(_JOB_LOGGER)
        if _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)
        if level is not None:
            # INFO at least: a run's log is where a job's detail belongs, even on a host whose
            # stderr shows only warnings (its handler still filters at log_level).
            numeric = level if isinstance(level, int) else _LEVELS.get(str(level).upper(), 0)
            logger.setLevel(min(logging.INFO, numeric or logging.INFO))


# -- the job logger ----------------------------------------------------------------------------
# ``context.logger``: a standard :class:`logging.Logger` whose quiet lines cost little. A line at
# a level only the run log takes is appended to the run's buffer directly, without a LogRecord;
# every other line takes the standard path. Made per run, its parent the registered
# ``jobhost.job.NAME`` logger, so levels, handlers, ``getChild`` and ``extra`` work as usual.

_ExcInfo: TypeAlias = (
    bool
    | tuple[type[BaseException], BaseException, TracebackType | None]
    | tuple[None, None, None]
    | BaseException
    | None
)
_RECORD_KEYS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}
"""Keys ``extra`` may not use: such a line takes the standard path, which raises."""
_DEBUG, _INFO, _WARNING = logging.DEBUG, logging.INFO, logging.WARNING
_ERROR, _CRITICAL = logging.ERROR, logging.CRITICAL


class JobLogger(logging.Logger):
    def __init__(self, name: str, run_log: RunLog) -> None:
        super().__init__(name)
        self.parent = logging.getLogger(name)
        self.disabled = self.parent.disabled  # as a configuration left the registered one
        self._run_log = run_log
        self._kept = 0
        self._shown = -1
        """Levels in ``[_kept, _shown)`` go straight to the run log; -1: not surveyed yet."""

    # Keyword arguments as :meth:`logging.Logger.debug` takes them (``exc_info``,
    # ``stack_info``, ``stacklevel``, ``extra``), passed on as they are.
    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._line(_DEBUG, msg, args, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._line(_INFO, msg, args, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._line(_WARNING, msg, args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._line(_ERROR, msg, args, **kwargs)

    def critical(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._line(_CRITICAL, msg, args, **kwargs)

    fatal = critical

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not isinstance(level, int):
            # The standard logger's error for a level that is not a number.
            super().log(level, msg, *args, **kwargs)
            return
        self._line(level, msg, args, **kwargs)

    def isEnabledFor(self, level: int) -> bool:
        # Not cached: the manager clears the caches of the loggers it knows when a level
        # changes, and it does not know this one.
        if self.disabled or self.manager.disable >= level:
            return False
        return level >= self.getEffectiveLevel()

    def setLevel(self, level: int | str) -> None:
        super().setLevel(level)
        self._shown = -1

    def addHandler(self, hdlr: logging.Handler) -> None:
        super().addHandler(hdlr)
        self._shown = -1

    def removeHandler(self, hdlr: logging.Handler) -> None:
        super().removeHandler(hdlr)
        self._shown = -1

    def _line(
        self,
        level: int,
        msg: object,
        args: tuple[object, ...],
        exc_info: _ExcInfo = None,
        *,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        if self._shown < 0:
            self._survey()
        if (
            self._kept <= level < self._shown
            and not exc_info
            and not stack_info
            and not self.filters
            and (not extra or _RECORD_KEYS.isdisjoint(extra))
        ):
            try:
                message = msg if type(msg) is str else str(msg)
                if args:
                    message = message % _format_args(args)
            except Exception:
                pass  # the standard path reports it as logging does ("--- Logging error ---")
            else:
                run_log = self._run_log
                if run_log.add(time.time(), logging.getLevelName(level), message):
                    run_log.wake()
                return
        if not self.isEnabledFor(level):
            return
        # Two frames of ours between the job's call and _log: the caller logging records is
        # the job's line, as with a plain logger.
        if current_run() is self._run_log:
            self._log(level, msg, args, exc_info, extra, stack_info, stacklevel + 2)
            return
        with running(self._run_log):  # a thread of the job's own: its run still gets the line
            self._log(level, msg, args, exc_info, extra, stack_info, stacklevel + 2)

    def _survey(self) -> None:
        """Which levels only the run log takes: kept by the loggers, below every other handler."""
        shown = logging.CRITICAL + 1_000
        captured = False
        logger: logging.Logger | None = self
        while logger is not None:
            for handler in logger.handlers:
                if handler is _HANDLER:
                    captured = True
                else:
                    shown = min(shown, handler.level)
            if not logger.propagate:
                break
            logger = logger.parent
        self._kept = max(self.getEffectiveLevel(), self.manager.disable + 1)
        self._shown = shown if captured else 0


def _format_args(args: tuple[object, ...]) -> object:
    # As LogRecord: a lone non-empty mapping fills "%(key)s" placeholders.
    if len(args) == 1:
        only = args[0]
        if type(only) is not str and isinstance(only, Mapping) and only:
            return only
    return args
