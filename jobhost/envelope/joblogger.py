"""``context.logger``: a standard :class:`logging.Logger` whose quiet lines cost little.

A busy host runs thousands of job lines a second that its stderr does not show (``log_level``
WARNING, the lines INFO): they are kept only in their run's log. Through a plain logger each one
finds its caller's frame, builds a ``LogRecord`` and walks the handlers, several times what
keeping the line costs. A :class:`JobLogger` knows, for the run it belongs to, which levels only
its run log would take; a line at such a level is formatted (``msg % args``) and appended to the
run's buffer directly, and redacted later by the run-log writer. Every other line (one stderr
would show, one with a traceback or stack, one through a logger with filters) takes the standard
path, so the host's stderr (text or JSON) gets exactly the lines it got before.

It is made per run, named ``jobhost.job.NAME`` with the registered logger of that name as its
parent: levels set on the loggers above it, their handlers, ``getChild`` and ``extra`` work as
for any logger. Its lines go to its run's log from any thread (units of ``fan_out`` run in a pool).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TypeAlias

from jobhost.envelope.runlog import RunLog, current_run, is_capture, running

__all__ = ["JobLogger", "job_logger"]

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
"""Keys ``extra`` may not use (``makeRecord`` raises for them): such a line takes the standard
path and raises as it always did."""
_DEBUG, _INFO, _WARNING = logging.DEBUG, logging.INFO, logging.WARNING
_ERROR, _CRITICAL = logging.ERROR, logging.CRITICAL


def job_logger(job_name: str, run_log: RunLog | None) -> logging.Logger:
    """The logger of one run of ``job_name``: a :class:`JobLogger` when the run keeps a log,
    else the registered ``jobhost.job.NAME`` logger."""
    name = f"jobhost.job.{job_name}"
    if run_log is None:
        return logging.getLogger(name)
    return JobLogger(name, run_log)


class JobLogger(logging.Logger):
    """One run's ``jobhost.job.NAME`` logger (see the module's docstring)."""

    def __init__(self, name: str, run_log: RunLog) -> None:
        super().__init__(name)
        self.parent = logging.getLogger(name)
        self.disabled = self.parent.disabled  # as a configuration left the registered one
        self._run_log = run_log
        self._kept = 0
        self._shown = -1
        """Levels in ``[_kept, _shown)`` go straight to the run log; -1: not surveyed yet (a run
        that writes no line never is)."""

    def debug(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._line(
            _DEBUG, msg, args, exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
        )

    def info(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._line(
            _INFO, msg, args, exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
        )

    def warning(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._line(
            _WARNING, msg, args, exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
        )

    def error(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._line(
            _ERROR, msg, args, exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
        )

    def critical(
        self,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._line(
            _CRITICAL,
            msg,
            args,
            exc_info,
            stack_info=stack_info,
            stacklevel=stacklevel,
            extra=extra,
        )

    fatal = critical

    def log(
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: _ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        if not isinstance(level, int):
            # The standard logger's error for a level that is not a number.
            super().log(level, msg, *args, exc_info=exc_info, extra=extra)
            return
        self._line(
            level, msg, args, exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
        )

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
        exc_info: _ExcInfo,
        *,
        stack_info: bool,
        stacklevel: int,
        extra: Mapping[str, object] | None,
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
        """Which levels only the run log takes: at or above the level the loggers keep, below
        the level of every other handler a record of this logger reaches."""
        shown = logging.CRITICAL + 1_000
        captured = False
        logger: logging.Logger | None = self
        while logger is not None:
            for handler in logger.handlers:
                if is_capture(handler):
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
